// Package tests drives the real binaries, built once by TestMain, over
// temporary spools: the same commands an operator types, checked with the
// same eyes (ls, cat).
package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds spool, spoold, watchd and vmgate, built for this run and put
// first on PATH.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vmspool-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/spool", "./cmd/spoold", "./cmd/watchd", "./cmd/vmgate")
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binaries:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	binDir = dir
	// A race-built binary sleeps a second at exit by default; the tests
	// start hundreds of them.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The tests choose their spools; nothing of the caller's may leak in.
	for _, v := range []string{"SPOOL_DIR", "JOBS_DIR", "SPOOL_JOB", "SPOOL_CHAT", "SPOOL_EVENTS"} {
		os.Unsetenv(v)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bin returns the path of one of the built binaries.
func bin(name string) string { return filepath.Join(binDir, name) }

// newSpool makes an empty spool directory for one test.
func newSpool(t testing.TB) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "spool")
	if err := os.MkdirAll(d, 0o750); err != nil {
		t.Fatal(err)
	}
	return d
}
