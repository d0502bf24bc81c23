package tests

// A host whose heartbeat stops succeeding (its spool cut off) must end its
// job before the lease can expire elsewhere, by signals alone, and then
// write nothing for it: the job belongs to whoever recovers it. The cut is
// made here by making the lease immutable (chattr +i: its heartbeat, a
// utimes, fails with EPERM even for root); a network filesystem that hangs
// is the case this stands for (docs/spoold.md, "Cut off").

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestFenceCutOff(t *testing.T) {
	attackNeedRoot(t)
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr (e2fsprogs): the test cuts a heartbeat off with chattr +i")
	}
	dir := newSpool(t)
	probe := filepath.Join(dir, ".probe")
	os.WriteFile(probe, nil, 0o600)
	if out, err := exec.Command("chattr", "+i", probe).CombinedOutput(); err != nil {
		t.Skipf("chattr +i does not work on this filesystem: %v: %s", err, out)
	}
	exec.Command("chattr", "-i", probe).Run()
	os.Remove(probe)

	out := t.TempDir()
	const lease = 2 * time.Second
	// --shared on: the spool is on a local disk here, where the fence
	// runs only if another host may use it.
	p := spooldStart(t, dir, "--lease", lease.String(), "--kill-grace", "300ms", "--rescan", "500ms", "--shared", "on")
	// The first attempt records its pid and sleeps; the second ends at once.
	job := spooldSubmit(t, dir, "--chat", "cut", "--attempts", "2", "--", "sh", "-c",
		`if [ -e "$0/second" ]; then exit 0; fi; touch "$0/second"; echo $$ > "$0/pid"; exec sleep 60`, out)
	var pid int
	eventually(t, 20*time.Second, 10*time.Millisecond, "the first attempt to start", func() bool {
		b, err := os.ReadFile(filepath.Join(out, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	running := filepath.Join(dir, job+spool.ExtRunning)
	// Once the lease holds the process group (its one rewrite), only
	// heartbeats touch it: the cut then stops nothing but them.
	eventually(t, 20*time.Second, 10*time.Millisecond, "the lease to hold the process group", func() bool {
		b, _ := os.ReadFile(running)
		return strings.Contains(string(b), `"pgid"`)
	})
	if out, err := exec.Command("chattr", "+i", running).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v: %s", err, out)
	}
	cut := time.Now()
	t.Cleanup(func() { exec.Command("chattr", "-i", running).Run() })
	fi, _ := os.Stat(running)
	lastBeat := fi.ModTime()
	// The job is ended by signals before its lease, counted from its last
	// heartbeat, can expire anywhere.
	eventually(t, 10*time.Second, 5*time.Millisecond, "the fence to end the job", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
	ended := time.Now()
	t.Logf("cut %v after the last heartbeat; the job ended %v after it (lease %v)", cut.Sub(lastBeat).Round(time.Millisecond), ended.Sub(lastBeat).Round(time.Millisecond), lease)
	if ended.Sub(lastBeat) >= lease {
		t.Errorf("the job outlived its lease: it ended %v after its last heartbeat", ended.Sub(lastBeat))
	}
	eventually(t, 10*time.Second, 20*time.Millisecond, "spoold to say it fenced the job", func() bool {
		log := p.logText()
		return strings.Contains(log, "no heartbeat for") && strings.Contains(log, "fenced: the job was ended while the spool did not answer; writing nothing")
	})
	// The spool answers again: the lease has expired, the job is
	// recovered and its second attempt runs; the fenced run wrote nothing.
	if out, err := exec.Command("chattr", "-i", running).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	s := openSpool(t, dir, 200)
	r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond)
	if r.State != spool.Done || r.Attempt != 2 {
		t.Errorf("after the cut the job ended %s, attempt %d; want done by its second attempt", r.State, r.Attempt)
	}
	// Only the second attempt wrote an end: the fenced one wrote none.
	eventually(t, 10*time.Second, 20*time.Millisecond, "the second attempt's end in the log", func() bool {
		return strings.Contains(p.logText(), `"msg":"ended"`)
	})
	if n := strings.Count(p.logText(), `"msg":"ended"`); n != 1 {
		t.Errorf("%d attempts logged an end; want the second only", n)
	}
	// The one spoold recovered its own fenced run: its worker did not
	// die, and the requeue says what ended the attempt.
	evs, _ := os.ReadFile(filepath.Join(dir, job+spool.ExtEvents))
	if !strings.Contains(string(evs), "fence ended it: no heartbeat succeeded for") || strings.Contains(string(evs), "died") {
		t.Errorf("the requeue's event does not say the fence ended the attempt:\n%s", evs)
	}
	if n := strings.Count(p.logText(), "no heartbeat for"); n != 1 {
		t.Errorf("the fence was logged %d times; want once", n)
	}
}
