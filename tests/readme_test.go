package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the first ```sh block of README.md after the line
// that starts with heading, as it is written there.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading)
	if i < 0 {
		t.Fatalf("README.md has no line starting %q", heading)
	}
	s = s[i:]
	const open, end = "\n```sh\n", "\n```\n"
	j := strings.Index(s, open)
	if j < 0 {
		t.Fatalf("README.md has no sh block after %q", heading)
	}
	s = s[j+len(open):]
	k := strings.Index(s, end)
	if k < 0 {
		t.Fatalf("README.md's sh block after %q is not closed", heading)
	}
	return s[:k+1]
}

// TestReadmeOneMachine runs README's "On one machine, with nothing
// installed" block as it is written, in bash, ten times, each in a fresh
// directory holding the built binaries as bin/ (what `make` leaves in a
// clone): every run must print the job's statuses to its end and the
// gate's refusal, and leave no daemon behind. It failed 3 times in 5 when
// the block submitted before spoold had made the tree.
func TestReadmeOneMachine(t *testing.T) {
	block := readmeBlock(t, "On one machine, with nothing installed")
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	// The binaries `make` builds: without the race detector, whose build
	// of `spool` would sleep a second at each exit of a job's `spool say`
	// (a job's environment carries no GORACE).
	bins := binDir
	if raceEnabled {
		bins = t.TempDir()
		// As `make build` builds them, so that its build cache serves.
		cmd := exec.Command("go", "build", "-trimpath", "-o", bins+"/", "./cmd/spool", "./cmd/spoold", "./cmd/watchd", "./cmd/vmgate")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	start := time.Now()
	for i := range 10 {
		dir := t.TempDir()
		if err := os.Symlink(bins, filepath.Join(dir, "bin")); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", block)
		cmd.Dir = dir
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PWD=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "PWD="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			err = syscall.ETIMEDOUT
		}
		// Whatever the block left running is in its process group.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err == syscall.ETIMEDOUT {
			<-done
		}
		o := out.String()
		logs, _ := os.ReadFile(filepath.Join(dir, "spoold.log"))
		for _, want := range []string{"\nbuilding\nbuilt\nrun ", " done\n", "vmgate refused `git add -A`"} {
			if !strings.Contains(o, want) {
				t.Fatalf("run %d: no %q in the block's output (%v):\n%s\nspoold.log:\n%s", i+1, want, err, o, logs)
			}
		}
		for _, not := range []string{"no such spool", "command not found", "\"level\"", "flag needs"} {
			if strings.Contains(o, not) {
				t.Fatalf("run %d: %q in the block's output:\n%s", i+1, not, o)
			}
		}
		// Its exit is the last kill's: 1 if watchd serve could not have
		// its port (another on this machine may hold 8377), which is no
		// failure of the block's.
		if err == syscall.ETIMEDOUT {
			t.Fatalf("run %d: still running after 15s:\n%s", i+1, o)
		}
	}
	t.Logf("10 runs in %v", time.Since(start).Round(time.Millisecond))
}
