package spoold

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// MaxBackoff caps the wait of a job queued again after its worker died.
const MaxBackoff = 5 * time.Minute

// Backoff is how long a job waits before its next attempt, after attempt
// (1-based) was lost with its worker: 1s, 2s, 4s... up to MaxBackoff.
func Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 20 {
		return MaxBackoff
	}
	d := time.Second << (attempt - 1)
	if d > MaxBackoff {
		d = MaxBackoff
	}
	return d
}

// recoverAll judges every lease in the tree that is not this daemon's own
// run. The set of leases is kept current from events (and rebuilt by each
// rescan), so a round reads one lease per running job, never the directory.
func (d *Daemon) recoverAll() {
	d.mu.Lock()
	var jobs []string
	for job := range d.running {
		if _, mine := d.runs[job]; mine {
			continue
		}
		if _, busy := d.recovering[job]; busy {
			continue
		}
		jobs = append(jobs, job)
	}
	d.mu.Unlock()
	for _, job := range jobs {
		l, fi, dead := d.judge(job)
		if !dead {
			continue
		}
		d.mu.Lock()
		if _, busy := d.recovering[job]; busy {
			d.mu.Unlock()
			continue
		}
		d.recovering[job] = struct{}{}
		d.mu.Unlock()
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			d.recoverJob(job, l, fi)
			d.mu.Lock()
			delete(d.recovering, job)
			d.mu.Unlock()
		}()
	}
}

// judge reads a lease and says whether its worker is dead: on this host,
// by its process alone, whatever the heartbeat's age: dead when its pid
// is gone or is a newer process (start time, boot id), alive while it
// lives (spool.Lease.ByProcess); from another host (or a lease that does
// not name its process exactly), when its heartbeat has not moved for its
// lease (life: no longer than this daemon's) as this daemon watched it
// (liveness.go: no clock of another host is believed; a lease of this
// daemon's own too, unless one of its runs or claims holds it). An
// unreadable lease is a claim in progress until it has stood still, its
// times and size unchanged, for the lease (a claim's rename sets the
// ctime, its write makes a new file).
func (d *Daemon) judge(job string) (*spool.Lease, fs.FileInfo, bool) {
	l, fi, err := d.s.ReadLease(job)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			d.mu.Lock()
			delete(d.running, job)
			delete(d.fenced, job)
			d.mu.Unlock()
			return nil, nil, false
		}
		if errors.Is(err, spool.ErrCorrupt) && fi != nil {
			return &spool.Lease{Job: job}, fi, d.silence(job, spool.FileStampOf(fi)) >= d.cfg.Lease
		}
		return nil, nil, false
	}
	d.sawHost(l.Host)
	if l.Worker == d.cfg.Worker && l.PID == d.pid && l.Host == d.cfg.Host {
		// Ours. A run's heartbeats keep it, and a claim in flight is
		// being handled (a hung daemon is judged by the others). Looked
		// at after the read: a claim begins before its rename.
		d.mu.Lock()
		_, run := d.runs[job]
		_, claiming := d.claiming[job]
		d.mu.Unlock()
		if run || claiming {
			return l, fi, false
		}
		// Neither: nothing of ours heartbeats it (a requeue that failed,
		// a run our fence ended), and it is dead once its heartbeat is
		// older than the lease, as anyone's. Our pid is alive, so only
		// the heartbeat can say so.
		return l, fi, d.silence(job, spool.FileStampOf(fi)) >= d.life(l)
	}
	// On the lease's own host its process decides, whatever the
	// heartbeat's age: a paused worker is alive, and a dead one's job is
	// recovered at once (docs/contract.md, invariant 4). From another
	// host, its heartbeat.
	if decides, alive := l.ByProcess(d.cfg.Host, d.boot); decides {
		return l, fi, !alive
	}
	return l, fi, d.silence(job, spool.FileStampOf(fi)) >= d.life(l)
}

// recoverJob takes over the job of a dead worker: it is queued again by a
// rename (the lease's mtime set to the backoff first) while attempts
// remain, or ended failed "worker W died".
func (d *Daemon) recoverJob(job string, l *spool.Lease, fi fs.FileInfo) {
	e := d.log.WithFields(logrus.Fields{"job": job, "chat": l.Chat, "worker": d.cfg.Worker, "attempt": l.Attempt, "dead_worker": l.Worker})
	if f, err := d.s.JobFiles(job); err == nil {
		if st, _ := f.State(); st.Final() {
			// A crash between writing the result and removing the lease.
			if err := d.s.Remove(job + spool.ExtRunning); err == nil {
				e.WithField("state", st).Info("removed the lease of an ended job")
			}
			return
		}
	}
	max := 1
	chat := l.Chat
	sp, err := d.s.ReadSpec(job)
	if err == nil {
		max, chat = sp.MaxTries(), sp.Chat
	}
	e = e.WithField("chat", chat)
	who := l.Worker
	if who == "" {
		who = "(an unfinished claim)"
	}
	died := fmt.Sprintf("worker %s died", who)
	if f, ok := d.fencedOwn(job, l); ok {
		// Our own run, which our fence ended: the worker lives, and
		// says why the attempt ended.
		died = fmt.Sprintf("worker %s's fence ended it: no heartbeat succeeded for %v", who, f.after.Round(time.Millisecond))
	}
	// What the attempt left running on this host ends first, whatever
	// comes next: the next attempt may be claimed on a host that cannot
	// see these processes.
	if l.Host == d.cfg.Host && d.attemptAlive(job) {
		if d.endAttempt(job, chat, l.PGID, d.cfg.KillGrace) {
			e.Info("ended the processes left by the dead worker")
		} else {
			e.Warn("processes left by the dead worker still hold the spec lock")
		}
	}
	if r := l.Ending; r != nil {
		// Its worker died while it ended the job: that end is finished
		// as it was begun, whatever attempts remain.
		if err := d.s.End(spool.Ending{Result: r, Lease: l, Worker: d.cfg.Worker}); err != nil {
			e.WithError(err).Error("cannot finish the end of the job")
			return
		}
		d.cfg.Metrics.EndedUnstarted(string(r.State))
		e.WithField("state", r.State).Info("recovered: finished the end its worker began")
		return
	}
	if l.Tries() < max {
		wait := Backoff(l.Attempt)
		ok, err := d.s.Requeue(l, d.now().Add(wait))
		if err != nil {
			e.WithError(err).Error("cannot queue the job again")
			return
		}
		if !ok {
			return // another daemon acted first
		}
		d.cfg.Metrics.Recovered("requeued")
		text := fmt.Sprintf("%s; queued again (attempt %d of %d) in %v", died, l.Tries()+1, max, wait)
		d.s.AppendEvent(job, spool.Event{Type: spool.EventWorker, Text: text, Worker: d.cfg.Worker, Attempt: l.Attempt})
		d.s.NoteProgress(l, chat, spool.Queued, nil, d.cfg.Worker)
		e.WithField("backoff", wait.String()).Info("recovered: " + text)
		return
	}
	// No attempt left: the job is ended only now that the attempt's
	// processes on this host are gone (End checks that the lease is still
	// the one judged dead).
	why := died
	res := &spool.Result{Job: job, Chat: chat, State: spool.Failed, Started: l.Claimed, Attempt: l.Attempt, First: l.First, Worker: l.Worker}
	res.Error = &why
	if err := d.s.End(spool.Ending{Result: res, Lease: l, Worker: d.cfg.Worker}); err != nil {
		if !errors.Is(err, spool.ErrLeaseLost) {
			e.WithError(err).Error("cannot end the job")
		}
		return
	}
	d.cfg.Metrics.Recovered("failed")
	d.cfg.Metrics.EndedUnstarted(string(spool.Failed))
	e.Info("recovered: " + why + "; ended failed")
}

// fencedOwn reports whether l is the lease of a run of this daemon that its
// fence ended, and forgets it: the lease is being recovered.
func (d *Daemon) fencedOwn(job string, l *spool.Lease) (fencedRun, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.fenced[job]
	delete(d.fenced, job)
	own := l.Worker == d.cfg.Worker && l.PID == d.pid && l.Host == d.cfg.Host
	return f, ok && own && f.attempt == l.Attempt
}
