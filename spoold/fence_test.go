package spoold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// The timing rule (fence.go): wherever CheckShared lets spoold run, a
// cut-off host's job is dead before the earliest moment another host may
// take it over or run its chat's next job, whatever the poll's phase and
// with clocks stepped by up to the skew bound. Past the bound a
// heartbeat's mark may repeat for more than one period, and the rule no
// longer holds: the last row shows the check can fail.
func TestFenceBeforeTakeover(t *testing.T) {
	const s = time.Second
	const ms = time.Millisecond
	sshfs := spool.Filesystem{Type: "fuse.sshfs"}
	gluster := spool.Filesystem{Type: "fuse.glusterfs"}
	nfs := spool.Filesystem{Type: "nfs4", Options: "rw,actimeo=3"}
	for _, tc := range []struct {
		name                   string
		fs                     spool.Filesystem
		lease, killGrace, poll time.Duration
		skew                   time.Duration // how far a clock steps back
		refused, unsafe        bool
	}{
		{"the proof's settings", sshfs, 6 * s, 500 * ms, 200 * ms, 0, false, false},
		{"the proof's settings, a clock stepped back by the bound", sshfs, 6 * s, 500 * ms, 200 * ms, SkewBound, false, false},
		{"the proof's settings, a slow poll", gluster, 6 * s, 500 * ms, 5 * s, SkewBound, false, false},
		{"the shortest lease for no kill grace", sshfs, 4800 * ms, 0, 200 * ms, SkewBound, false, false},
		{"a kill grace too long for the lease", sshfs, 6 * s, s, 200 * ms, 0, true, false},
		{"the defaults on GlusterFS", gluster, 30 * s, 5 * s, s, SkewBound, false, false},
		{"the smallest lease the refusal asks for", gluster, 14700 * ms, 5 * s, s, SkewBound, false, false},
		{"just below it", gluster, 14 * s, 5 * s, s, 0, true, false},
		{"NFS with actimeo=3", nfs, 2 * time.Minute, 5 * s, s, SkewBound, false, false},
		{"a long lease, a slow poll", sshfs, 10 * time.Minute, 30 * s, time.Minute, SkewBound, false, false},
		{"a clock stepped back 3 s, past the bound", sshfs, 4800 * ms, 0, 200 * ms, 3 * s, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckShared(tc.fs, tc.poll, tc.lease, tc.killGrace)
			if refused := err != nil; refused != tc.refused {
				t.Fatalf("CheckShared: %v; want refused %v", err, tc.refused)
			}
			if tc.refused {
				return
			}
			stale := EngineOf(tc.fs).Stale
			dead := worstDead(tc.lease, tc.killGrace)
			if dead > fenceBy(tc.lease, tc.killGrace) {
				t.Errorf("the job is dead %v after its last heartbeat began; fenceBy says %v", dead, fenceBy(tc.lease, tc.killGrace))
			}
			taken := earliestTakeover(tc.lease, tc.poll, stale, tc.skew)
			if unsafe := dead >= taken; unsafe != tc.unsafe {
				t.Errorf("dead by %v, taken over from %v (lease %v, kill grace %v, poll %v, a clock stepped back %v, marks stale %v): unsafe %v, want %v",
					dead, taken, tc.lease, tc.killGrace, tc.poll, tc.skew, stale, unsafe, tc.unsafe)
			}
			if !tc.unsafe && tc.skew <= SkewBound && taken-dead < 0 {
				t.Errorf("margin %v", taken-dead)
			}
		})
	}
}

// worstDead is when, counted from the moment the last successful
// heartbeat began, the fence has ended the job at the latest, over every
// phase of the fence's ticker: it fires at its first tick at which the
// heartbeat is half a lease old, SIGKILL follows the kill grace later, and
// the kernel ends the group within killSettle.
func worstDead(lease, killGrace time.Duration) time.Duration {
	tick := fenceTick(lease)
	var worst time.Duration
	for _, phase := range []time.Duration{1, tick / 3, tick / 2, tick - 1, tick} {
		fire := phase
		for fire < fenceAfter(lease) {
			fire += tick
		}
		worst = max(worst, fire+killGrace+killSettle)
	}
	return worst
}

// earliestTakeover is the earliest moment, counted as worstDead is,
// another host may take the job over, over every phase of its poll: it
// does so at a poll at which it has seen the lease's mark unchanged for a
// whole lease (liveness.go). It sees the last heartbeat's mark no earlier
// than the heartbeat began; but the marks of the last n heartbeats (one
// every beatEvery) equal the one before them when a clock stepped back by
// skew brings them within the marks' granularity (stale: sftp's whole
// seconds), and the silence then counts from n periods earlier.
func earliestTakeover(lease, poll, stale, skew time.Duration) time.Duration {
	period := beatEvery(lease)
	missed := 0
	for time.Duration(missed+1)*period-skew < stale {
		missed++
	}
	seen := -time.Duration(missed) * period
	earliest := time.Duration(1<<63 - 1)
	for _, phase := range []time.Duration{0, 1, poll / 2, poll - 1} {
		// The first poll at or after seen starts the silence; the first
		// at or after a lease later ends it.
		first := seen + ((phase-seen)%poll+poll)%poll
		at := first + lease
		if rem := (at - first) % poll; rem != 0 {
			at += poll - rem
		}
		earliest = min(earliest, at)
	}
	return earliest
}

// A claim whose calls hung past the fence's wait (a host cut off while it
// claimed, its calls carried out when the link healed, another host may
// have taken the job over meanwhile) starts nothing and writes nothing:
// the job is whoever recovers its lease's. The same claim made in time
// runs.
func TestFencedClaimStartsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		took time.Duration // how long the claim took
		runs bool
	}{
		{"in time", 0, true},
		{"past the fence", fenceAfter(30 * time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := newTestDaemon(t) // --lease 30s
			// --shared on: the fence runs where another host may take over.
			d.share("a test of the fence")
			ran := filepath.Join(t.TempDir(), "ran")
			job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"touch", ran}})
			if err != nil {
				t.Fatal(err)
			}
			sp, err := s.ReadSpec(job)
			if err != nil {
				t.Fatal(err)
			}
			chatLock, ok, err := s.LockChat("c")
			if err != nil || !ok {
				t.Fatalf("chat lock: %v, %v", ok, err)
			}
			defer chatLock.Close()
			claimed := time.Now().Add(-tc.took)
			l, prev, err := s.Claim(job, d.lease("c"))
			if err != nil || l == nil {
				t.Fatalf("claim: %v, %v", l, err)
			}
			lease, _ := os.ReadFile(s.Path(job + spool.ExtRunning))
			d.execute(sp, l, prev, chatLock, claimed)
			_, err = os.Stat(ran)
			if ran := err == nil; ran != tc.runs {
				t.Fatalf("the job ran: %v; want %v", ran, tc.runs)
			}
			st, _ := s.State(job)
			if tc.runs {
				if st != spool.Done {
					t.Errorf("state %s; want done", st)
				}
				return
			}
			if st != spool.Running {
				t.Errorf("state %s; want still running, its lease left to the recovery", st)
			}
			if now, _ := os.ReadFile(s.Path(job + spool.ExtRunning)); string(now) != string(lease) {
				t.Errorf("the lease was rewritten: %s; the claim left %s", now, lease)
			}
			if b, err := os.ReadFile(s.Path(job + spool.ExtEvents)); err == nil && len(b) > 0 {
				t.Errorf("events written: %s", b)
			}
			if p, err := s.ReadProgress("c"); err == nil && p.Job == job {
				t.Errorf("the chat's progress written: %+v", p)
			}
			// Its lease recovered by this daemon, as once it has stood
			// still for the lease: the worker did not die, its fence
			// ended the attempt, and the result says so.
			fi, err := os.Stat(s.Path(job + spool.ExtRunning))
			if err != nil {
				t.Fatal(err)
			}
			d.recoverJob(job, l, fi)
			if st, _ := s.State(job); st != spool.Failed {
				t.Fatalf("recovered: %s; want failed, its one attempt spent", st)
			}
			r, err := s.ReadResult(job, spool.Failed)
			if err != nil {
				t.Fatal(err)
			}
			if want := "worker " + d.cfg.Worker + "'s fence ended it: no heartbeat succeeded for "; r.Error == nil || !strings.HasPrefix(*r.Error, want) {
				t.Errorf("recovered with the error %q; want it to begin %q", *r.Error, want)
			}
		})
	}
}
