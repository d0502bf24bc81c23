package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// raceEnv is the environment of the binaries the tests start: a race
// build otherwise sleeps a second at every exit (GORACE atexit_sleep_ms).
func raceEnv() []string {
	return append(os.Environ(), "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
}

// command is the built binary name run with args in env.
func command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin(name), args...)
	cmd.Env = env
	return cmd
}

// openSpool opens the spool at dir, retrying every 10 ms while it does
// not open yet (a daemon may still be making it); it fails the test
// after tries+1 failed tries. The spool is closed when the test ends.
func openSpool(t testing.TB, dir string, tries int) *spool.Spool {
	t.Helper()
	for i := 0; ; i++ {
		s, err := spool.Open(dir)
		if err == nil {
			t.Cleanup(func() { s.Close() })
			return s
		}
		if i > tries {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the poll of the wait
	}
}

// eventually polls cond every `every` until it holds or within is up.
func eventually(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(every) // the poll of the wait
	}
}

// waitEnd waits (polling every `every`) for the job's final state and
// returns its result.
func waitEnd(t testing.TB, s *spool.Spool, job string, within, every time.Duration) *spool.Result {
	t.Helper()
	var st spool.State
	eventually(t, within, every, "job "+job+" to end", func() bool {
		st, _ = s.State(job)
		return st.Final()
	})
	r, err := s.ReadResult(job, st)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spoolUnder makes a spool at parent/spool (0750, its parent 0755) and
// lets prep spoil one of the two, as an attack on a root daemon would.
func spoolUnder(t *testing.T, prep func(parent, dir string) error) (parent, dir string) {
	t.Helper()
	parent = filepath.Join(t.TempDir(), "parent")
	dir = filepath.Join(parent, "spool")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(parent, 0o755)
	if err := prep(parent, dir); err != nil {
		t.Fatal(err)
	}
	return parent, dir
}

// exitsAtStart runs a daemon that must refuse to start and returns its
// exit code and output; one still running after within is killed and
// fails the test with what (a refusal that never came).
func exitsAtStart(t *testing.T, cmd *exec.Cmd, within time.Duration, what string) (int, string) {
	t.Helper()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: %s", what, out)
	}
	return exitCode(err), string(out)
}

// exitCode is a finished command's exit status: 0 for no error, -1 when it
// did not run or was killed by a signal.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
