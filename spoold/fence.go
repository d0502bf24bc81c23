package spoold

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A host cut off from the spool (its network filesystem hung or gone)
// cannot heartbeat, and after the lease another host recovers its jobs and
// may run them again, or run the chat's next job. So the jobs must be
// stopped here first, without the filesystem's help: the heartbeat runs in
// a goroutine of its own, and a fence, in another, ends the job's process
// group by signals alone once no heartbeat has succeeded for half the
// lease (SIGTERM, then SIGKILL after the kill grace). The run then writes
// nothing more for the job: the lease expires and whoever recovers the job
// owns it (docs/spoold.md, "Cut off").
//
// Both run from the claim, not from the job's start: what comes between
// (the spec's lock, the first event and progress, the log's open) touches
// the spool, and a cut there used to leave the claim unguarded: its calls
// carried out when the link healed, past the lease, and the job started
// then beside the run another host had taken over (TestMultiHost's chat
// run twice at once). A fence that fires before the job starts keeps it
// from starting.

// The timing rule. Times are counted from the moment the last heartbeat
// that succeeded began (the claim's, before the first): the heartbeat's
// mark reaches the file server after that moment, and another host sees it
// after that.
//
//   - fenceBy: this host's job is dead at the latest that long after it
//     (the fence's wait of half the lease, one tick of the fence's clock,
//     the kill grace, and the kernel's end of what SIGKILL hit);
//   - takeoverAfter: another host takes the job over, or claims the chat's
//     next job, at the earliest that long after it: it must have watched
//     the heartbeat stand still for a whole lease on its own monotonic
//     clock (liveness.go), and it cannot have seen it before it was made.
//
// No wall clock enters either, so a skew between the hosts' clocks does not
// move them, and a stale attribute cache only delays the takeover. The
// margin between them is kept above the documented bound of a skew
// (SkewBound) and the engine's staleness all the same (CheckShared): a
// heartbeat whose mark equals the one before (whole-second mtimes, a clock
// stepped back) is not seen to move, and the takeover then counts from
// the heartbeat before it.

// SkewBound is the documented bound of the clocks' skew between the hosts
// and the file servers (docs/operations.md, "Clocks").
const SkewBound = time.Second

// killSettle is how long the kernel may take to end a process group that
// SIGKILL hit. A process stuck in a call of a filesystem that does not
// answer is not ended until it answers, but runs nothing more of the job.
const killSettle = 100 * time.Millisecond

// maxFenceTick caps the fence's tick (fenceTick).
const maxFenceTick = 250 * time.Millisecond

// beatEvery is how often a run heartbeats its lease: three tries within
// the fence's half lease, so that over a lossy link (TestMultiHost's 10 %)
// one or two slow heartbeats do not get a live job fenced. It was lease/3
// until the fence counted from a heartbeat's beginning: with that, and
// one try within the half lease, a single heartbeat slowed by loss fenced
// live jobs.
func beatEvery(lease time.Duration) time.Duration { return lease / 6 }

// fenceAfter is how long without a successful heartbeat a job may run on.
func fenceAfter(lease time.Duration) time.Duration { return lease / 2 }

// fenceTick is how often the fence looks at the heartbeat's age.
func fenceTick(lease time.Duration) time.Duration {
	return min(max(lease/60, 10*time.Millisecond), maxFenceTick)
}

// fenceBy is how long after the last successful heartbeat began a
// cut-off host's job is dead at the latest.
func fenceBy(lease, killGrace time.Duration) time.Duration {
	return fenceAfter(lease) + fenceTick(lease) + killGrace + killSettle
}

// takeoverAfter is how long after the last heartbeat began another host
// may take the job over, or run its chat's next job, at the earliest.
func takeoverAfter(lease time.Duration) time.Duration { return lease }

// fenceMargin is how much earlier than the earliest takeover a cut-off
// host's job is dead at the latest, the skew bound and the filesystem's
// staleness taken off: negative where the settings are unsafe.
func fenceMargin(lease, killGrace, stale time.Duration) time.Duration {
	return takeoverAfter(lease) - fenceBy(lease, killGrace) - SkewBound - stale
}

// minSharedLease is a lease long enough for killGrace and stale:
// fenceMargin of it is not negative.
func minSharedLease(killGrace, stale time.Duration) time.Duration {
	return 2 * (maxFenceTick + killGrace + killSettle + SkewBound + stale)
}

// beat is the heartbeat and fence of one run.
type beat struct {
	base    time.Time     // monotonic: what last counts from
	after   time.Duration // how long no heartbeat had succeeded when the fence fired; set before fenced
	last    atomic.Int64  // when the last successful heartbeat began, after base
	fenced  atomic.Bool
	lost    chan struct{} // closed when the lease is found lost
	fence   chan string   // the fence's reason, once
	done    chan struct{}
	stopped sync.Once
}

// startBeat heartbeats the run's lease every beatEvery and fences it, the
// lease's age counted from claimed (when the claim began) until a
// heartbeat succeeds. A claim that took past the fence's wait (its calls
// hung) is fenced before this returns: nothing of it starts, nothing more
// is written. stop ends both goroutines without waiting for a heartbeat
// blocked on a hung filesystem.
func (r *run) startBeat(claimed time.Time) *beat {
	d := r.d
	b := &beat{base: claimed, lost: make(chan struct{}), fence: make(chan string, 1), done: make(chan struct{})}
	age := func() time.Duration { return time.Since(b.base) - time.Duration(b.last.Load()) }
	fire := func(since time.Duration) {
		b.after = since
		b.fenced.Store(true)
		why := fmt.Sprintf("no heartbeat for %v (the spool does not answer): the job is ended before its lease can expire elsewhere", since.Round(time.Millisecond))
		r.log.Warn(why)
		d.cfg.Metrics.LeaseLost()
		r.signal(syscall.SIGTERM)
		b.fence <- why
	}
	if a := age(); a >= fenceAfter(d.cfg.Lease) && d.shared() {
		fire(a)
		return b
	}
	lease := *r.lease // the fields Heartbeat compares never change during the run
	go func() {       // the heartbeat
		t := time.NewTicker(beatEvery(d.cfg.Lease))
		defer t.Stop()
		failing := false
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
			}
			// When it began, not when it returned: the mark may reach
			// the server long before its answer comes back (a lossy
			// link's retransmissions).
			began := time.Since(b.base)
			err := d.s.Heartbeat(&lease)
			switch {
			case err == nil:
				b.last.Store(int64(began))
				if failing {
					r.log.Info("heartbeat: the spool answers again")
				}
				failing = false
			case errors.Is(err, spool.ErrLeaseLost):
				close(b.lost)
				return
			case !failing:
				failing = true
				r.log.WithError(err).Warn("heartbeat failed; the job is fenced if none succeeds for half the lease")
			}
		}
	}()
	go func() { // the fence: signals only, never the filesystem
		t := time.NewTicker(fenceTick(d.cfg.Lease))
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
			}
			// Only where another host may take the job over: on a
			// spool this host alone uses, a late heartbeat is a pause,
			// and the run lives (sharing.go).
			if a := age(); a >= fenceAfter(d.cfg.Lease) && d.shared() {
				fire(a)
				break
			}
		}
		select {
		case <-b.done:
		case <-time.After(d.cfg.KillGrace):
			r.signal(syscall.SIGKILL)
		}
	}()
	return b
}

func (b *beat) stop() { b.stopped.Do(func() { close(b.done) }) }

// fencedRun is what a daemon remembers of a run of its own that its fence
// ended, for the recovery of its lease: the daemon did not die, and the
// result or the requeue says what ended the attempt.
type fencedRun struct {
	attempt int
	after   time.Duration // no heartbeat had succeeded for that long
}

// fenced reports whether the run's fence has fired: nothing more of it
// runs, and nothing more is written for it.
func (r *run) fenced() bool { return r.beat != nil && r.beat.fenced.Load() }
