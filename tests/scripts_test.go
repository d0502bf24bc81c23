package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/vmspool/vmspool/spool"
)

// TestScripts runs the operator's stories, the txtar scripts of each
// directory of testdata/ that holds them (spool, spoold, vmgate, watchd),
// with one setup and one set of commands: the real binaries on PATH, an
// empty spool named by SPOOL_DIR, the tree checked with ls, cat and grep.
// (testdata/contract holds the writers' cases, TestContract's.)
func TestScripts(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if stories, _ := filepath.Glob(filepath.Join(dir, "*.txtar")); len(stories) == 0 {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			testscript.Run(t, testscript.Params{Dir: dir, Setup: scriptSetup, Cmds: scriptCmds})
		})
	}
}

// scriptSetup is the setup of every story: the test's binaries first on
// PATH, a race build's exit not slowed, and an empty spool in the
// script's work directory, named by SPOOL_DIR as an operator's would be.
func scriptSetup(env *testscript.Env) error {
	env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
	env.Setenv("GORACE", "atexit_sleep_ms=0")
	dir := filepath.Join(env.WorkDir, "spool")
	env.Setenv("SPOOL_DIR", dir)
	return os.Mkdir(dir, 0o750)
}

// scriptCmds are the commands the stories have besides testscript's own.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// age D FILE...: set the files' mtime D in the past (D may be
	// negative: the future).
	"age": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) < 2 {
			ts.Fatalf("usage: age DURATION FILE...")
		}
		d, err := time.ParseDuration(args[0])
		ts.Check(err)
		tm := time.Now().Add(-d)
		for _, f := range args[1:] {
			ts.Check(os.Chtimes(ts.MkAbs(f), tm, tm))
		}
	},
	// waitstate JOB STATE: wait (up to 20s) for the job's state.
	"waitstate": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: waitstate JOB STATE")
		}
		s, err := spool.Open(ts.Getenv("SPOOL_DIR"))
		ts.Check(err)
		defer s.Close()
		var st spool.State
		if scriptWait(func() bool { st, _ = s.State(args[0]); return string(st) == args[1] }) {
			return
		}
		ts.Fatalf("job %s is %q, not %s, after 20s", args[0], st, args[1])
	},
	// waitgrep REGEXP FILE: wait (up to 20s) for a line of FILE to match.
	"waitgrep": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: waitgrep REGEXP FILE")
		}
		re, err := regexp.Compile(args[0])
		ts.Check(err)
		if scriptWait(func() bool { b, err := os.ReadFile(ts.MkAbs(args[1])); return err == nil && re.Match(b) }) {
			return
		}
		ts.Fatalf("no %q in %s after 20s", args[0], args[1])
	},
}

// scriptWait asks cond every 10 ms for up to 20 s.
func scriptWait(cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
