package tests

// A pause is not a death on a spool one host uses (docs/contract.md,
// invariant 4; docs/spoold.md, "Cut off"): a run whose spoold is stopped,
// or whose whole host is (spoold and the job frozen), for three leases
// goes on to its end at its first attempt, and another spoold on the
// spool takes none of a stopped one's jobs, since on the lease's own host
// its process, alive, decides whatever the heartbeat's age. The opposite
// still holds: a spoold killed mid-job has its job recovered at once, not
// after the lease, and the job's processes ended before it is queued
// again or ended.

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestPauseLocal(t *testing.T) {
	const lease = 2 * time.Second
	const pause = 3 * lease
	args := func(more ...string) []string {
		return append([]string{"--lease", lease.String(), "--kill-grace", "300ms", "--metrics-file", "off"}, more...)
	}
	// job runs sh with body, which records its pid (its group's) at
	// $0.pid; spool say is on its PATH.
	job := func(t *testing.T, dir, chat, body string) (id, pidFile string) {
		pidFile = filepath.Join(t.TempDir(), "job")
		id = spooldSubmit(t, dir, "--chat", chat, "--attempts", "1", "--", "sh", "-c", `echo $$ > "$0.pid"; `+body, pidFile)
		return id, pidFile + ".pid"
	}
	said := func(s *spool.Spool, id, text string) bool {
		evs, _ := s.NewEventReader(id).Read()
		return spooldHasEvent(evs, spool.EventStatus, text)
	}
	signal := func(t *testing.T, pid int, sig syscall.Signal) {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatalf("kill(%d, %v): %v", pid, sig, err)
		}
	}
	// intact checks that the run ended done at its first attempt, by
	// worker, with its statuses in order and nothing else said of it.
	intact := func(t *testing.T, s *spool.Spool, p *proc, id, chat, worker string, statuses ...string) {
		t.Helper()
		r := waitEnd(t, s, id, 30*time.Second, 20*time.Millisecond)
		if r.State != spool.Done || r.Attempt != 1 || r.Error != nil || (worker != "" && r.Worker != worker) {
			t.Errorf("job %s: %s at attempt %d by %s (%v); want done at attempt 1 by %s", id, r.State, r.Attempt, r.Worker, r.Error, worker)
		}
		var got []string
		for _, ev := range spooldEvents(t, s, id) {
			switch ev.Type {
			case spool.EventStatus:
				got = append(got, ev.Text)
			case spool.EventWorker:
				t.Errorf("job %s: a worker note: %q", id, ev.Text)
			}
		}
		if strings.Join(got, "|") != strings.Join(statuses, "|") {
			t.Errorf("job %s: statuses %q; want %q", id, got, statuses)
		}
		pr := spooldFinalProgress(t, s, chat)
		if pr == nil || pr.Job != id || pr.State != spool.Done || pr.Attempt != 1 {
			t.Errorf("chat %s: progress %+v; want the job's, done at attempt 1", chat, pr)
		}
		if strings.Contains(p.logText(), "no heartbeat for") {
			t.Errorf("spoold fenced a run on a local spool")
		}
	}

	t.Run("spoold stopped", func(t *testing.T) {
		t.Parallel()
		dir := newSpool(t)
		p := spooldStart(t, dir, args()...)
		s := openSpool(t, dir, 200)
		id, _ := job(t, dir, "stopped", `spool say working; sleep 2; spool say halfway; sleep 4.5; spool say finished`)
		eventually(t, 20*time.Second, 10*time.Millisecond, "the job to say working", func() bool { return said(s, id, "working") })
		signal(t, p.cmd.Process.Pid, syscall.SIGSTOP)
		time.Sleep(pause) // the pause itself: three leases with spoold stopped
		signal(t, p.cmd.Process.Pid, syscall.SIGCONT)
		intact(t, s, p, id, "stopped", "", "working", "halfway", "finished")
	})

	t.Run("spoold and job frozen", func(t *testing.T) {
		t.Parallel()
		dir := newSpool(t)
		p := spooldStart(t, dir, args()...)
		s := openSpool(t, dir, 200)
		id, pidFile := job(t, dir, "frozen", `spool say working; sleep 2; spool say finished`)
		eventually(t, 20*time.Second, 10*time.Millisecond, "the job to say working", func() bool { return said(s, id, "working") })
		b, _ := os.ReadFile(pidFile)
		pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pgid <= 1 {
			t.Fatalf("the job's pid: %q", b)
		}
		// As a suspended host: the job's group and spoold at once.
		signal(t, -pgid, syscall.SIGSTOP)
		signal(t, p.cmd.Process.Pid, syscall.SIGSTOP)
		time.Sleep(pause) // the pause itself: three leases with both frozen
		signal(t, p.cmd.Process.Pid, syscall.SIGCONT)
		signal(t, -pgid, syscall.SIGCONT)
		intact(t, s, p, id, "frozen", "", "working", "finished")
	})

	t.Run("two spoold, one stopped", func(t *testing.T) {
		t.Parallel()
		dir := newSpool(t)
		a := spooldStart(t, dir, args("--worker", "A")...)
		s := openSpool(t, dir, 200)
		id, _ := job(t, dir, "held", `spool say working; sleep 6.5; spool say finished`)
		eventually(t, 20*time.Second, 10*time.Millisecond, "the job to say working", func() bool { return said(s, id, "working") })
		b := spooldStart(t, dir, args("--worker", "B")...)
		signal(t, a.cmd.Process.Pid, syscall.SIGSTOP)
		stopped := time.Now()
		// B serves meanwhile: a job queued during the pause is B's.
		other, _ := job(t, dir, "other", `spool say other`)
		if r := waitEnd(t, s, other, 20*time.Second, 20*time.Millisecond); r.State != spool.Done || r.Worker != "B" {
			t.Errorf("the job queued during the pause: %s by %s; want done by B", r.State, r.Worker)
		}
		for time.Since(stopped) < pause {
			if l, _, err := s.ReadLease(id); err != nil || l.Worker != "A" || l.Attempt != 1 {
				t.Fatalf("%v into A's pause, the job's lease: %+v, %v; want A's, attempt 1", time.Since(stopped).Round(time.Millisecond), l, err)
			}
			time.Sleep(50 * time.Millisecond) // the pace of the look, all through the pause
		}
		signal(t, a.cmd.Process.Pid, syscall.SIGCONT)
		intact(t, s, a, id, "held", "A", "working", "finished")
		if strings.Contains(b.logText(), "recovered") {
			t.Errorf("B recovered something:\n%s", b.logText())
		}
	})

	t.Run("kill -9 recovered at once", func(t *testing.T) {
		t.Parallel()
		// A lease of 3 s: a heartbeat must stand still that long, less
		// the last one's age (at most half a second), before it could
		// say the worker died; its pid says so within a recovery round.
		const lease = 3 * time.Second
		dir := newSpool(t)
		more := []string{"--lease", lease.String(), "--kill-grace", "2s", "--metrics-file", "off"}
		a := spooldStart(t, dir, append(more, "--worker", "A", "--workers", "2")...)
		s := openSpool(t, dir, 200)
		trace := filepath.Join(t.TempDir(), "trace")
		// The first attempt traps TERM and is slow to go; the second
		// ends at once.
		body := `echo "start $SPOOL_JOB $SPOOL_ATTEMPT" >> "$0"
if [ "$SPOOL_ATTEMPT" = 1 ]; then
  trap 'sleep 0.3; echo "end $SPOOL_JOB $SPOOL_ATTEMPT" >> "$0"; exit 143' TERM
  sleep 60 & wait
fi
echo "end $SPOOL_JOB $SPOOL_ATTEMPT" >> "$0"`
		a.quiet = true
		retried := spooldSubmit(t, dir, "--chat", "k1", "--attempts", "2", "--", "bash", "-c", body, trace)
		once := spooldSubmit(t, dir, "--chat", "k2", "--attempts", "1", "--", "bash", "-c", body, trace)
		eventually(t, 20*time.Second, 10*time.Millisecond, "both jobs to start", func() bool {
			b, _ := os.ReadFile(trace)
			return bytes.Count(b, []byte("start ")) == 2
		})
		// B starts once A has claimed both, and has watched their
		// leases for a while when A dies.
		spooldStart(t, dir, append(more, "--worker", "B")...)
		time.Sleep(lease / 2) // B watches A's leases a while: what A's death must find in place
		a.kill()
		killed := time.Now()
		// Queued again, or ended: each only once its first attempt's
		// processes have ended.
		left := map[string]bool{retried: true, once: true}
		for len(left) > 0 && time.Since(killed) < 10*time.Second {
			for id := range left {
				if st, _ := s.State(id); st == spool.Running {
					continue
				}
				took := time.Since(killed)
				b, _ := os.ReadFile(trace)
				if !bytes.Contains(b, []byte("end "+id+" 1")) {
					t.Errorf("job %s was queued again or ended before its first attempt's processes ended:\n%s", id, b)
				}
				t.Logf("job %s recovered %v after the kill", id, took.Round(time.Millisecond))
				if took >= lease*8/10 {
					t.Errorf("job %s recovered %v after the kill; want within a recovery round, well before the lease (%v)", id, took, lease)
				}
				delete(left, id)
			}
			time.Sleep(5 * time.Millisecond) // the pace of the look
		}
		if len(left) > 0 {
			t.Fatalf("not recovered 10 s after the kill: %v", left)
		}
		if r := waitEnd(t, s, retried, 20*time.Second, 20*time.Millisecond); r.State != spool.Done || r.Attempt != 2 {
			t.Errorf("job %s: %s at attempt %d; want done at attempt 2", retried, r.State, r.Attempt)
		}
		if r := waitEnd(t, s, once, 20*time.Second, 20*time.Millisecond); r.State != spool.Failed || r.Error == nil || *r.Error != "worker A died" {
			t.Errorf("job %s: %s %v; want failed, worker A died", once, r.State, r.Error)
		}
	})
}
