package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Third review: a job's script appends its own question and holds the
// flock of its events file ($SPOOL_EVENTS), and the person answers. spoold's
// relay of the answer waited for that lock forever, and the run's loop
// with it, so SIGTERM never stopped spoold (it waits for its runs after the
// grace). The relay now waits for the lock a bounded time (spool/lock.go),
// and spoold stops within its grace and the job's kill grace. On the code
// before, the answer was never relayed (the wait below failed), and
// neither SIGTERM nor SIGTERM and SIGINT ("stop now") stopped spoold: it
// was killed by the test's cleanup.
func TestAttackHeldEventsLock(t *testing.T) {
	dir := newSpool(t)
	d := spooldStart(t, dir, "--grace", "500ms", "--kill-grace", "1s", "--metrics-file", "off")
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "c", "--", "sh", "-c",
		`printf '{"type":"question","id":"q1","text":"go on?"}\n' >> "$SPOOL_EVENTS"; exec 9>>"$SPOOL_EVENTS"; flock 9; echo locked; exec sleep 600`)
	eventually(t, 30*time.Second, 20*time.Millisecond, "the question", func() bool {
		p, err := s.ReadProgress("c")
		return err == nil && p.Question != nil
	})
	eventually(t, 30*time.Second, 20*time.Millisecond, "the job to hold its events' lock", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, job+".log"))
		return strings.Contains(string(b), "locked")
	})
	if out, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "c", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, out)
	}
	eventually(t, 30*time.Second, 20*time.Millisecond, "the relay of the answer", func() bool {
		return strings.Contains(d.logText(), "answer received")
	})
	d.stop(t, 20*time.Second)
}
