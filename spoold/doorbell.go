package spoold

import (
	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// doorbell answers a Look of doorbell/ (with --poll only: spool's
// doorbell.go): its names are the jobs queued and running, and those that
// just changed, a few where the root may hold millions. A job rung that
// this daemon does not know yet is looked at by name (an lstat or two):
// queued, it is queued here (and its cancel request handed on); running,
// its lease is one to judge; neither, its bell is taken. The root's own
// listing stays the safety net (listing.go), for what nobody rang for: a
// hand submission, a hand-written cancel.
func (d *Daemon) doorbell() {
	if d.cfg.Poll <= 0 {
		return
	}
	jobs, err := d.s.Bells()
	if err != nil {
		d.log.WithError(err).WithFields(logrus.Fields{"worker": d.cfg.Worker}).Warn("reading the doorbell")
		return
	}
	for _, job := range jobs {
		if d.q.has(job) {
			continue
		}
		if _, err := d.s.Stat(job + spool.ExtReady); err == nil {
			d.enqueue(job)
			if _, err := d.s.Stat(job + spool.ExtCancel); err == nil {
				d.cancel(job)
			}
			continue
		}
		if _, err := d.s.Stat(job + spool.ExtRunning); err == nil {
			d.mu.Lock()
			d.running[job] = struct{}{}
			d.mu.Unlock()
			continue
		}
		d.s.Unring(job)
	}
}
