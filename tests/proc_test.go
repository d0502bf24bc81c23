package tests

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// proc is one daemon a test started, as a separate process of the built
// binary. Its output goes to a file whose tail is shown if the test fails;
// when the test ends it is stopped for good (quit), so that no daemon and
// no job outlives the test.
type proc struct {
	name  string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	err   error
	quiet bool // no log on failure (a daemon killed on purpose)
}

// startProc starts the binary name with args in env (the whole
// environment: raceEnv, spooldEnv...).
func startProc(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	return startPath(t, env, name, bin(name), args...)
}

// startPath is startProc of the program at path, called name.
func startPath(t testing.TB, env []string, name, path string, args ...string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	p := &proc{name: name, cmd: cmd, log: logf.Name(), done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.quit()
		if t.Failed() && !p.quiet {
			b, _ := os.ReadFile(p.log)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("%s %d %q log (tail):\n%s", name, cmd.Process.Pid, args, b)
		}
	})
	return p
}

// kill sends SIGKILL and reaps the process (a zombie's pid would still
// look alive to a recoverer).
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// quit stops the daemon at the end of a test: two signals (a daemon's
// "stop now", which ends its jobs' groups), SIGTERM then SIGINT, which the
// kernel cannot merge into one as it may two of the same; then SIGKILL if
// that is not enough.
func (p *proc) quit() {
	if !p.alive() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// stop sends SIGTERM and waits for the exit, which must be 0.
func (p *proc) stop(t testing.TB, within time.Duration) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.name, within)
	}
	if p.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM; want 0", p.name, p.err)
	}
}

// logText is what the daemon has logged so far.
func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}
