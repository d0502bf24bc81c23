package spoold

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// What one runaway job may do to the spool every chat shares is bounded
// here (docs/operations.md, "Limits"): its log is cut back when it passes
// its limit, its events file past its own ends the job, events beyond a
// rate are not relayed to the chat (one note says how many), and below the
// free-space floor no new job is claimed.

// limitEvery is how often a running job's log and events are measured (a
// job writing at disk speed overshoots their limit by at most this much
// of writing), and how often at most its log is cut.
const limitEvery = 50 * time.Millisecond

// syncSlice is the most events one pass of the run's loop folds into the
// progress: a job appending at disk speed must not keep the loop from its
// heartbeat, its timeout and its limits.
const syncSlice = 8192

// syncBudget is how long one pass of the loop may read a flood.
const syncBudget = 50 * time.Millisecond

// watchLimits measures the job's events, and its log when the job writes
// the log itself (in a cgroup: output.go), every limitEvery in a goroutine
// of its own, until stop; an events file past its limit is sent on hit
// (once), the job's processes having been sent SIGTERM at once. stop
// returns once the goroutine is gone: the usage it wrote may then be read.
func (r *run) watchLimits() (hit <-chan string, stop func()) {
	if r.use.lim.Events <= 0 && (r.use.lim.Log <= 0 || r.out != nil) {
		return nil, func() {}
	}
	h := make(chan string, 1)
	done, gone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gone)
		t := time.NewTicker(limitEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if why := r.checkLimits(); why != "" {
					r.signal(syscall.SIGTERM)
					h <- why
					<-done
					return
				}
			}
		}
	}()
	var once sync.Once
	return h, func() {
		once.Do(func() {
			close(done)
			// A measure blocked on a hung filesystem is not waited for
			// long: the usage it would write is then not read (a fenced
			// run writes nothing).
			select {
			case <-gone:
			case <-time.After(2 * time.Second):
				r.use.stuck = true
			}
		})
	}
}

// limitsFor is the job's limits: the daemon's, or what its spec asks
// within the daemon's ceilings.
func (d *Daemon) limitsFor(sp *spool.Spec) spool.Limits {
	l := d.cfg.Limits
	if a := sp.Limits; a != nil {
		l.Log = askFor(l.Log, a.Log, d.cfg.Ceilings.Log)
		l.Events = askFor(l.Events, a.Events, d.cfg.Ceilings.Events)
		l.EventRate = int(askFor(int64(l.EventRate), int64(a.EventRate), int64(d.cfg.Ceilings.EventRate)))
	}
	return l
}

func askFor(def, want, ceiling int64) int64 {
	switch {
	case want <= 0:
		return def
	case ceiling > 0 && want > ceiling:
		return ceiling
	}
	return want
}

// usage is what a run has written against its limits. The log's fields
// are the limit watcher's (watchLimits) until it stops, or the output
// copy's until it ends (output.go); the events' the watcher's; the rate's
// the run loop's.
type usage struct {
	lim       spool.Limits
	logCuts   int
	logCut    int64     // bytes cut from the log in all
	rateStart time.Time // the current second of the event rate
	rateN     int       // events relayed in it
	dropped   int64     // events not relayed and not yet noted
	noted     time.Time // when the last note of dropped events was made
	dropTotal int64
	eventsCap bool // the events file passed its limit
	stuck     bool // the watcher did not stop: its fields are not read
	logStuck  bool // the output copy did not end: its fields are not read
}

// checkLimits measures the job's log, when the job writes it itself, and
// cuts it past its limit (without a cgroup, the copy of the job's output
// does, output.go); and the job's events: past their limit it returns the
// reason to end the job.
func (r *run) checkLimits() (stop string) {
	d, u := r.d, &r.use
	if u.lim.Log > 0 && r.out == nil {
		if fi, err := d.s.Stat(r.job + spool.ExtLog); err == nil && fi.Size() > u.lim.Log {
			r.cutLog(fi.Size())
		}
	}
	if u.lim.Events > 0 && !u.eventsCap {
		if fi, err := d.s.Stat(r.job + spool.ExtEvents); err == nil && fi.Size() > u.lim.Events {
			u.eventsCap = true
			d.cfg.Metrics.LimitHit("events")
			return fmt.Sprintf("events passed their limit of %s", spool.FormatSize(u.lim.Events))
		}
	}
	return ""
}

// cutLog cuts the job's log, size bytes and past its limit, back to its
// first half and its newest quarter with a line marking the cut (the
// job's output goes on after it). Called by the limit watcher or the copy
// of the output, whichever writes the log's usage.
func (r *run) cutLog(size int64) {
	d, u := r.d, &r.use
	lim := u.lim.Log
	n, err := d.s.CutLog(r.job, lim/2, lim/4, logMark(lim, size))
	if err != nil {
		r.log.WithError(err).Warn("cannot cut the log")
		return
	}
	if n == 0 {
		return
	}
	if u.logCuts == 0 {
		text := fmt.Sprintf("log passed its limit of %s: cut to its first half and its newest quarter, and again each time it passes it", spool.FormatSize(lim))
		r.event(spool.Event{Type: spool.EventWorker, Text: text})
		r.log.WithField("limit", "log").Warn(text)
	}
	u.logCuts++
	u.logCut += n
	d.cfg.Metrics.LimitHit("log")
}

// admit says whether an event read from the job's file is relayed to the
// chat's progress: all are, up to the job's rate a second; past it a
// status is counted and left out (the file keeps it; a watcher sees the
// gap, and noteDropped says how many). Questions, answers, starts, ends,
// the gate's and spoold's own notes always go through.
func (r *run) admit(ev spool.Event, now time.Time) bool {
	u := &r.use
	if u.lim.EventRate <= 0 {
		return true
	}
	switch ev.Type {
	case spool.EventQuestion, spool.EventAnswer, spool.EventStart, spool.EventEnd, spool.EventGate:
		return true
	case spool.EventWorker:
		if ev.Worker == r.d.cfg.Worker {
			return true
		}
	}
	if now.Sub(u.rateStart) >= time.Second {
		u.rateStart, u.rateN = now, 0
	}
	if u.rateN < u.lim.EventRate {
		u.rateN++
		return true
	}
	u.dropped++
	return false
}

// noteDropped appends one note of the events not relayed since the last
// note, at most once a second (or at once with force, before the end).
func (r *run) noteDropped(now time.Time, force bool) {
	u := &r.use
	if u.dropped == 0 || !force && now.Sub(u.noted) < time.Second {
		return
	}
	if u.dropTotal == 0 {
		r.log.WithFields(logrus.Fields{"limit": "event_rate", "rate": u.lim.EventRate}).Warn("events past the rate: not relayed to the chat")
	}
	n := u.dropped
	u.dropTotal += n
	u.dropped, u.noted = 0, now
	r.d.cfg.Metrics.LimitHit("event_rate")
	r.event(spool.Event{Type: spool.EventWorker,
		Text: fmt.Sprintf("%d events dropped: more than %d a second (the job's events file keeps them)", n, u.lim.EventRate)})
}

// hits is what the result says of the limits the job reached.
func (u *usage) hits() []string {
	var out []string
	if u.stuck {
		return nil
	}
	if u.logCuts > 0 && !u.logStuck {
		out = append(out, fmt.Sprintf("log: cut %d times, %s not kept (limit %s)", u.logCuts, spool.FormatSize(u.logCut), spool.FormatSize(u.lim.Log)))
	}
	if u.dropTotal > 0 {
		out = append(out, fmt.Sprintf("event rate: %d events not relayed to the chat (more than %d a second)", u.dropTotal, u.lim.EventRate))
	}
	if u.eventsCap {
		out = append(out, fmt.Sprintf("events: past %s, the job was ended", spool.FormatSize(u.lim.Events)))
	}
	return out
}

// belowFloor says whether the spool's free space is below the floor, as
// checked at most every half second; it logs each crossing once and
// keeps the metrics current. A statfs that fails says nothing: claims go
// on (the disk's own errors are handled where they happen).
func (d *Daemon) belowFloor() bool {
	if d.cfg.Floor == (spool.Floor{}) {
		return false
	}
	d.floorMu.Lock()
	defer d.floorMu.Unlock()
	now := time.Now()
	if now.Sub(d.floorAt) < 500*time.Millisecond {
		return d.floorErr != nil
	}
	d.floorAt = now
	sp, err := spool.SpaceOf(d.root)
	if err != nil {
		return false
	}
	below := d.cfg.Floor.Below(d.root, sp)
	floorBytes := max(d.cfg.Floor.Bytes, int64(d.cfg.Floor.Percent/100*float64(sp.Size)))
	d.cfg.Metrics.Space(sp.Free, sp.FreeInodes, floorBytes, d.cfg.Floor.Inodes, below != nil)
	switch {
	case below != nil && d.floorErr == nil:
		d.log.WithError(below).WithField("worker", d.cfg.Worker).Warn("below the free-space floor: claiming no new job until space is freed; running jobs go on")
	case below == nil && d.floorErr != nil:
		d.log.WithField("worker", d.cfg.Worker).Info("free space above the floor again: claiming")
	}
	d.floorErr = below
	return below != nil
}
