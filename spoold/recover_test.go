package spoold

import (
	"os"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A lease of this daemon's own that nothing of it heartbeats (a requeue
// that failed left it) is dead once its heartbeat has stood still for the
// lease, and is recovered by the daemon itself; one of its runs or of its
// claims in flight is never judged.
func TestJudgeOwnLease(t *testing.T) {
	d, s := newTestDaemon(t)
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := s.Claim(job, d.lease("c"))
	if err != nil || l == nil {
		t.Fatalf("claim: %v, %v", l, err)
	}
	// age makes the lease look seen still for a: one sighting, moved back.
	age := func(a time.Duration) {
		tm := time.Now().Add(-time.Hour)
		if err := os.Chtimes(s.Path(job+spool.ExtRunning), tm, tm); err != nil {
			t.Fatal(err)
		}
		d.judge(job)
		d.smu.Lock()
		d.sightings[job].since = d.sightings[job].since.Add(-a)
		d.smu.Unlock()
	}
	for _, tc := range []struct {
		name string
		age  time.Duration
		hold func() func() // what of the daemon holds the job, and its release
		dead bool
	}{
		{name: "fresh, held by nothing", age: 0, dead: false},
		{name: "old, held by nothing", age: 2 * d.cfg.Lease, dead: true},
		{name: "old, a claim in flight", age: 2 * d.cfg.Lease, hold: func() func() {
			d.claimBegin(job)
			return func() { d.claimEnd(job) }
		}},
		{name: "old, a run", age: 2 * d.cfg.Lease, hold: func() func() {
			d.mu.Lock()
			d.runs[job] = &run{}
			d.mu.Unlock()
			return func() { d.mu.Lock(); delete(d.runs, job); d.mu.Unlock() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			age(tc.age)
			if tc.hold != nil {
				defer tc.hold()()
			}
			if _, _, dead := d.judge(job); dead != tc.dead {
				t.Errorf("judged dead %v, want %v", dead, tc.dead)
			}
		})
	}

	// The whole round: recoverAll queues it again, with its backoff.
	age(2 * d.cfg.Lease)
	d.mu.Lock()
	d.running[job] = struct{}{}
	d.mu.Unlock()
	d.recoverAll()
	d.bg.Wait()
	st, err := s.State(job)
	if err != nil || st != spool.Queued {
		t.Fatalf("after recoverAll: %s, %v; want queued", st, err)
	}
	m, err := s.ReadMarker(job)
	if err != nil || m.Attempt != l.Attempt+1 || !m.NotBefore.After(time.Now()) {
		t.Errorf("marker %+v, %v; want attempt %d after a backoff", m, err, l.Attempt+1)
	}
}

// A heartbeat is judged by whether it moves, not by its time: a lease whose
// mtime is an hour old (its host's clock behind) is alive while it moves,
// and one whose mtime is in the future (a clock ahead, or a planted lease)
// is dead once it has stood still for the lease.
func TestJudgeIgnoresClocks(t *testing.T) {
	d, s := newTestDaemon(t)
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	other := d.lease("c")
	other.Host, other.Worker = "elsewhere", "elsewhere:1"
	if l, _, err := s.Claim(job, other); err != nil || l == nil {
		t.Fatalf("claim: %v, %v", l, err)
	}
	beat := func(at time.Time) {
		if err := os.Chtimes(s.Path(job+spool.ExtRunning), at, at); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 3; i++ {
		beat(old.Add(time.Duration(i) * time.Second))
		if _, _, dead := d.judge(job); dead {
			t.Fatalf("a lease an hour old that moves (beat %d) judged dead", i)
		}
	}
	beat(time.Now().Add(time.Hour))
	if _, _, dead := d.judge(job); dead {
		t.Fatal("a lease seen once judged dead")
	}
	d.smu.Lock()
	d.sightings[job].since = d.sightings[job].since.Add(-d.cfg.Lease)
	d.smu.Unlock()
	if _, _, dead := d.judge(job); !dead {
		t.Error("a lease an hour in the future, still for a lease, judged alive")
	}
}

// On the lease's own host its process decides, whatever the heartbeat's
// age: a live worker (a paused spoold) is alive for ever, a gone or
// reused pid is dead at once. From another host, the heartbeat decides.
func TestJudgeByProcess(t *testing.T) {
	d, s := newTestDaemon(t)
	for _, tc := range []struct {
		name  string
		edit  func(l *spool.Lease)
		still time.Duration // how long the heartbeat was seen still
		dead  bool
	}{
		{"this host, alive, heartbeat old", func(l *spool.Lease) {}, 10 * d.cfg.Lease, false},
		{"this host, pid reused, heartbeat fresh", func(l *spool.Lease) { l.PIDStart++ }, 0, true},
		{"this host, pid gone, heartbeat fresh", func(l *spool.Lease) { l.PID = 1 << 30 }, 0, true},
		{"this host, no start time, heartbeat old", func(l *spool.Lease) { l.PIDStart = 0 }, 2 * d.cfg.Lease, true},
		{"this host, no start time, heartbeat fresh", func(l *spool.Lease) { l.PIDStart = 0 }, 0, false},
		{"another host, heartbeat old", func(l *spool.Lease) { l.Host = "elsewhere" }, 2 * d.cfg.Lease, true},
		{"another host, heartbeat fresh", func(l *spool.Lease) { l.Host = "elsewhere" }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
			if err != nil {
				t.Fatal(err)
			}
			// Another worker of this process: not one of d's runs.
			l := d.lease("c")
			l.Worker = "another"
			tc.edit(&l)
			if got, _, err := s.Claim(job, l); err != nil || got == nil {
				t.Fatalf("claim: %v, %v", got, err)
			}
			// As if this daemon had watched the heartbeat stand still.
			fi, err := os.Stat(s.Path(job + spool.ExtRunning))
			if err != nil {
				t.Fatal(err)
			}
			d.silence(job, spool.FileStampOf(fi))
			d.smu.Lock()
			d.sightings[job].since = d.sightings[job].since.Add(-tc.still)
			d.smu.Unlock()
			if _, _, dead := d.judge(job); dead != tc.dead {
				t.Errorf("judged dead %v, want %v", dead, tc.dead)
			}
		})
	}
}
