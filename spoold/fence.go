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
// may run them again. So the jobs must be stopped here first, without the
// filesystem's help: the heartbeat runs in a goroutine of its own, and a
// fence, in another, ends the job's process group by signals alone once
// no heartbeat has succeeded for half the lease (SIGTERM, then SIGKILL
// after the kill grace). The run then writes nothing more for the job:
// the lease expires and whoever recovers the job owns it
// (docs/spoold.md, "Cut off").

// fenceAfter is how long without a successful heartbeat a job may run on.
func (d *Daemon) fenceAfter() time.Duration { return d.cfg.Lease / 2 }

// beat is the heartbeat and fence of one run.
type beat struct {
	last    atomic.Int64 // unix nanoseconds of the last successful heartbeat
	fenced  atomic.Bool
	lost    chan struct{} // closed when the lease is found lost
	fence   chan string   // the fence's reason, once
	done    chan struct{}
	stopped sync.Once
}

// startBeat heartbeats the run's lease every Lease/3 and fences it. stop
// ends both goroutines without waiting for a heartbeat blocked on a hung
// filesystem.
func (r *run) startBeat() *beat {
	d := r.d
	b := &beat{lost: make(chan struct{}), fence: make(chan string, 1), done: make(chan struct{})}
	b.last.Store(time.Now().UnixNano())
	lease := *r.lease // the fields Heartbeat compares never change during the run
	go func() {       // the heartbeat
		t := time.NewTicker(d.cfg.Lease / 3)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
			}
			err := d.s.Heartbeat(&lease)
			switch {
			case err == nil:
				b.last.Store(time.Now().UnixNano())
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
		t := time.NewTicker(max(d.cfg.Lease/12, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
			}
			since := time.Since(time.Unix(0, b.last.Load()))
			if since < d.fenceAfter() {
				continue
			}
			b.fenced.Store(true)
			why := fmt.Sprintf("no heartbeat for %v (the spool does not answer): the job is ended before its lease can expire elsewhere", since.Round(time.Millisecond))
			r.log.Warn(why)
			d.cfg.Metrics.LeaseLost()
			r.signal(syscall.SIGTERM)
			b.fence <- why
			select {
			case <-b.done:
			case <-time.After(d.cfg.KillGrace):
				r.signal(syscall.SIGKILL)
			}
			return
		}
	}()
	return b
}

func (b *beat) stop() { b.stopped.Do(func() { close(b.done) }) }
