package spoold

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// handle takes one queued job the whole way: spec, chat, claim, run. The
// order matters: the chat lock comes before the claim, so that a job of a
// busy chat stays queued (and visible as such) rather than held; and the
// processes a dead attempt left behind are ended before either, since they
// hold both locks.
func (d *Daemon) handle(it *item) {
	sp, ok := d.admit(it)
	chat := ""
	if ok {
		chat = sp.Chat
	}
	// In the order the jobs were taken, whichever worker read its spec
	// first: the chat's first job goes for it, a later one waits behind.
	first := d.q.settle(it, chat)
	if !ok {
		return
	}
	it.chat = sp.Chat
	if !first {
		d.q.park(it)
		return
	}
	if it.content {
		d.endOrphansOf(it.job)
	}
	chatLock, ok, err := d.s.LockChat(sp.Chat)
	if err != nil {
		d.log.WithError(err).WithFields(logrus.Fields{"job": it.job, "chat": sp.Chat, "worker": d.cfg.Worker}).Error("cannot lock chat")
		d.refuse(it.job, err)
		d.drop(it)
		return
	}
	if !ok {
		d.q.park(it)
		return
	}
	// A shared filesystem may not share flocks (sshfs does not): another
	// host's run of the chat is looked for in the leases too.
	shared := d.cfg.Poll > 0
	if shared && d.chatElsewhere(sp.Chat, it.job, nil) {
		// The chat runs on another host: the job is tried again in a
		// second, still the head of its chat's wait list, so that no
		// later job of the chat goes first meanwhile.
		chatLock.Close()
		it.at = d.now().Add(time.Second)
		d.q.push(it)
		return
	}
	if shared {
		// The mark goes first: a host that looks after this claim finds
		// it in the chat's directory.
		if err := d.s.MarkClaim(sp.Chat, it.job); err != nil {
			d.log.WithError(err).WithFields(logrus.Fields{"job": it.job, "chat": sp.Chat, "worker": d.cfg.Worker}).Warn("cannot mark the claim for other hosts")
		}
	}
	// On the way out: the chat's lock, then the chat's next job, then
	// the claim's mark.
	d.claimBegin(it.job)
	defer d.claimEnd(it.job)
	defer d.q.retry(sp.Chat)
	defer chatLock.Close()
	// The lease is as old as this moment until its first heartbeat: the
	// fence counts from it (fence.go).
	claimed := time.Now()
	lease, prev, err := d.s.Claim(it.job, d.lease(sp.Chat))
	if it.parked {
		d.q.headDone(sp.Chat)
	}
	if err != nil {
		// The lease could not be written (a full disk) and the marker was
		// put back. The job stays known, so that the event of that rename
		// does not bring it straight back: it is tried again in a second,
		// not in a loop.
		d.log.WithError(err).WithFields(logrus.Fields{"job": it.job, "chat": sp.Chat, "worker": d.cfg.Worker}).Error("claim; trying again in a second")
		d.backOff(it)
		return
	}
	d.q.forget(it.job)
	if lease == nil {
		return
	}
	// Two hosts may claim two jobs of one chat at once: the one claimed
	// later gives its job back, as it was.
	if shared && d.chatElsewhere(sp.Chat, it.job, lease) {
		if back, err := d.s.Unclaim(lease); err != nil || !back {
			d.log.WithError(err).WithFields(logrus.Fields{"job": it.job, "chat": sp.Chat, "worker": d.cfg.Worker}).Error("cannot give back a job whose chat runs elsewhere")
			return
		}
		d.backOff(it)
		return
	}
	d.cfg.Metrics.Claimed(time.Since(it.at))
	if shared {
		// Other hosts learn of the claim at the doorbell, not from a
		// listing of the root: a lease to judge, should this host die.
		d.s.Ring(it.job)
	}
	d.execute(sp, lease, prev, chatLock, claimed)
}

// admit reads the marker and the spec of a job about to be claimed, as
// they are now: the job may have been claimed by another daemon since it
// was queued here, or queued again with a backoff. ok is false when it is
// not claimed now (it was dropped, refused, or put back for later).
func (d *Daemon) admit(it *item) (sp *spool.Spec, ok bool) {
	fi, err := d.s.Stat(it.job + spool.ExtReady)
	if err != nil {
		d.drop(it)
		return nil, false
	}
	if fi.ModTime().After(d.now()) && fi.ModTime().After(it.at) {
		d.later(it, fi.ModTime())
		return nil, false
	}
	// Below the free-space floor nothing new is claimed: the job stays
	// queued, and is tried again in a second (limits.go).
	if d.belowFloor() {
		d.later(it, d.now().Add(time.Second))
		return nil, false
	}
	if err := d.s.CheckOwner(it.job+spool.ExtReady, fi); err != nil {
		d.untrusted(it.job, err)
		d.drop(it)
		return nil, false
	}
	it.content = fi.Size() > 0
	sp, err = d.s.ReadSpec(it.job)
	switch {
	case err == nil:
		return sp, true
	case errors.Is(err, spool.ErrUntrusted):
		d.untrusted(it.job, err)
	case !permanent(err):
		// EMFILE, EIO...: the next rescan tries again.
		d.log.WithError(err).WithFields(logrus.Fields{"job": it.job, "worker": d.cfg.Worker}).Error("cannot read spec; will retry")
	default:
		d.refuse(it.job, err)
	}
	d.drop(it)
	return nil, false
}

// chatElsewhere says whether another job of the chat runs under a live
// lease that goes before this one: any, before a claim (mine nil); after
// it, one claimed earlier, or at the same instant with a smaller id. This
// daemon's own runs of the chat hold its flock, so what it finds is
// another host's. A lease this daemon has seen still for longer than its
// length (life: no longer than this daemon's lease) is the recovery's.
func (d *Daemon) chatElsewhere(chat, job string, mine *spool.Lease) bool {
	ls, beats, err := d.s.ChatRunning(chat, job)
	if err != nil {
		return false
	}
	for i, l := range ls {
		d.sawHost(l.Host)
		if decides, alive := l.ByProcess(d.cfg.Host, d.boot); decides && !alive {
			continue // its worker is dead: the recovery's
		} else if decides {
			// A live process of this host holds it, whatever its
			// heartbeat's age: a paused worker is alive.
			if mine == nil || l.Claimed < mine.Claimed || l.Claimed == mine.Claimed && l.Job < mine.Job {
				return true
			}
			continue
		}
		life := d.life(l)
		// A heartbeat is live while this daemon sees it move (liveness.go),
		// whatever the clocks of the hosts say.
		quiet := d.silence("chat "+l.Job, beats[i])
		if l.Worker == "" {
			// Claimed, its lease not written yet: live for one lease from
			// when this daemon first saw it so, then the recovery's (a
			// claimer that died there leaves it so for ever).
			quiet = time.Since(d.firstSeenPending(l.Job))
		}
		if quiet > life {
			continue
		}
		// A claim whose lease is not written yet goes before: of two
		// such, both give way and try again.
		if mine == nil || l.Worker == "" || l.Claimed < mine.Claimed || l.Claimed == mine.Claimed && l.Job < mine.Job {
			return true
		}
	}
	return false
}

// firstSeenPending is when this daemon first saw job claimed without a
// lease. A record not looked at for two leases is dropped.
func (d *Daemon) firstSeenPending(job string) time.Time {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	now := time.Now()
	if d.pending == nil {
		d.pending = map[string][2]time.Time{}
	}
	for j, t := range d.pending {
		if now.Sub(t[1]) > 2*d.cfg.Lease {
			delete(d.pending, j)
		}
	}
	t, ok := d.pending[job]
	if !ok {
		t[0] = now
	}
	t[1] = now
	d.pending[job] = t
	return t[0]
}

// unpark lets go of a job that will not be claimed now: if it was the head
// of its chat's wait list, the next one may be tried.
func (d *Daemon) unpark(it *item) {
	if it.parked && it.chat != "" {
		d.q.headDone(it.chat)
		d.q.retry(it.chat)
	}
}

// drop lets go of a job that will not be claimed here.
func (d *Daemon) drop(it *item) {
	d.unpark(it)
	d.q.forget(it.job)
}

// later puts the job back in this daemon's queue, to be tried at at.
func (d *Daemon) later(it *item, at time.Time) {
	d.unpark(it)
	it.at, it.parked = at, false
	d.q.push(it)
}

// backOff puts back in the queue a job whose claim was given up after its
// chat's wait list was let go: a second and a random part later, so that
// two hosts that gave way together do not meet again.
func (d *Daemon) backOff(it *item) {
	it.at, it.parked = d.now().Add(time.Second+rand.N(500*time.Millisecond)), false
	d.q.push(it)
}

// claimBegin marks job as claimed by this daemon until claimEnd: from
// before the claim's rename (the .running then holds the marker's content,
// which may be an old lease of ours with an old mtime) until the claim is
// handled: run (it is in d.runs meanwhile), ended, or queued again. A lease
// of ours that is neither claiming nor run is left over (a requeue that
// failed), and judge treats it as any other once its heartbeat is old.
func (d *Daemon) claimBegin(job string) {
	d.mu.Lock()
	if d.claiming == nil {
		d.claiming = make(map[string]int)
	}
	d.claiming[job]++
	d.mu.Unlock()
}

func (d *Daemon) claimEnd(job string) {
	d.mu.Lock()
	if d.claiming[job]--; d.claiming[job] <= 0 {
		delete(d.claiming, job)
	}
	d.mu.Unlock()
}

// endOrphansOf ends, before a recovered job is claimed again, what its last
// attempt left running on this host (a spoold killed with -9 leaves its
// jobs' processes behind, and they hold the chat's lock and the spec's).
func (d *Daemon) endOrphansOf(job string) {
	prev := d.s.MarkerLease(job)
	if prev != nil {
		d.sawHost(prev.Host)
	}
	if prev == nil || prev.Host != d.cfg.Host || !d.attemptAlive(job) {
		return
	}
	e := d.log.WithFields(logrus.Fields{"job": job, "chat": prev.Chat, "worker": d.cfg.Worker, "attempt": prev.Attempt,
		"old_worker": prev.Worker, "pgid": prev.PGID})
	if d.endAttempt(job, prev.Chat, prev.PGID, d.cfg.KillGrace) {
		e.Info("ended the processes left by the attempt before")
	} else {
		e.Warn("processes of the attempt before still hold the spec lock")
	}
}

// refuse ends a job whose spec cannot be run: it is claimed (so that it is
// ended exactly once) and finished failed with the reason, which keeps it
// in `spool ls` and `spool show` rather than in corrupt/. If the chat can
// be read from the spec and is free, its progress says so too.
func (d *Daemon) refuse(job string, why error) {
	d.claimBegin(job)
	defer d.claimEnd(job)
	lease, _, err := d.s.Claim(job, d.lease(""))
	if err != nil || lease == nil {
		return
	}
	msg := why.Error()
	chat := d.s.LooseChat(job)
	lease.Chat = chat
	e := d.log.WithFields(logrus.Fields{"job": job, "chat": chat, "worker": d.cfg.Worker, "attempt": lease.Attempt})
	if d.endUnstarted(lease, chat, spool.Failed, msg, e) {
		e.WithField("error", msg).Warn("refused: spec cannot be run")
	}
}

// cancelQueued ends a job that was cancelled while queued: claimed, so
// that exactly one daemon ends it, then finished cancelled. Its chat's
// progress is written only if the chat is free: otherwise it belongs to
// the chat's running job.
func (d *Daemon) cancelQueued(job string) {
	d.claimBegin(job)
	defer d.claimEnd(job)
	lease, prev, err := d.s.Claim(job, d.lease(""))
	if err != nil || lease == nil {
		return
	}
	d.q.forget(job)
	sp, serr := d.s.ReadSpec(job)
	chat := ""
	if serr == nil {
		chat = sp.Chat
	} else {
		chat = d.s.LooseChat(job)
	}
	e := d.log.WithFields(logrus.Fields{"job": job, "chat": chat, "worker": d.cfg.Worker, "attempt": lease.Attempt})
	if prev != nil && prev.Host == d.cfg.Host {
		d.endAttempt(job, chat, prev.PGID, d.cfg.KillGrace)
	}
	if d.endUnstarted(lease, chat, spool.Cancelled, "cancelled before it started", e) {
		e.Info("cancelled while queued")
		if chat != "" {
			d.q.retry(chat)
		}
	}
}

// endUnstarted ends a job this daemon claimed and will not run (refused,
// or cancelled while queued) through spool.End, as every job ends. An end
// that could not begin (a full disk: the lease could not take the ending)
// queues the job again a second later: the claim is ours and nothing
// heartbeats it, so left so, a recoverer would end it "worker died". One
// that began is finished by whoever recovers the lease. It reports whether
// the job ended.
func (d *Daemon) endUnstarted(lease *spool.Lease, chat string, st spool.State, why string, e *logrus.Entry) bool {
	job := lease.Job
	res := &spool.Result{Job: job, Chat: chat, State: st, Attempt: lease.Attempt, First: lease.First, Worker: d.cfg.Worker, Started: lease.Claimed}
	res.Errorf("%s", why)
	if err := d.s.End(spool.Ending{Result: res, Lease: lease, Worker: d.cfg.Worker}); err != nil {
		if cur, _, rerr := d.s.ReadLease(job); rerr == nil && cur.Same(lease) && cur.Ending == nil {
			e.WithError(err).Error("cannot end the job; queued again")
			d.s.Requeue(lease, d.now().Add(time.Second))
		} else {
			e.WithError(err).Error("cannot end the job; the recovery finishes it")
		}
		return false
	}
	d.cfg.Metrics.EndedUnstarted(string(st))
	return true
}

// untrusted moves aside a job whose marker or spec another user owns
// (spool.TrustOwners): the marker first, so that it is no longer queued,
// then the spec, each into corrupt/ with the reason beside it. Nothing of
// it runs, and nothing is written as if it had.
func (d *Daemon) untrusted(job string, why error) {
	e := d.log.WithFields(logrus.Fields{"job": job, "worker": d.cfg.Worker})
	for _, name := range []string{job + spool.ExtReady, job + spool.ExtSpec} {
		if _, err := d.s.Stat(name); err != nil {
			continue
		}
		if _, err := d.s.Quarantine(name, "not run: "+why.Error()); err != nil {
			e.WithError(err).Error("cannot move an untrusted job aside")
			return
		}
	}
	e.WithField("error", why.Error()).Warn("refused: queued by an untrusted user; moved to corrupt/")
}
