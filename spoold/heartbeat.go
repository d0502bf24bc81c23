package spoold

import (
	"time"

	"github.com/vmspool/vmspool/spool"
)

// What a lease says of itself is believed only as far as this daemon's
// own lease and clock allow: a lease is a document anyone who can write
// the spool can plant, and one with a lease_s of 10^9 seconds, or a
// heartbeat a year ahead, kept its job running and its chat busy for
// ever (docs/reliability.md, "Attacks").

// life is how long a lease lives without a heartbeat: its own lease_s,
// but never longer than this daemon's --lease (hosts sharing a spool run
// one --lease; docs/spoold.md, "Leases, heartbeats, recovery"), nor
// anything but a positive number of seconds.
func (d *Daemon) life(l *spool.Lease) time.Duration {
	if !(l.LeaseS > 0) || l.LeaseS > d.cfg.Lease.Seconds() {
		return d.cfg.Lease
	}
	return l.Duration()
}

// futureBeat is a heartbeat seen in the future: the mtime, when this
// daemon first saw it, and when it last looked.
type futureBeat struct {
	mtime, first, last time.Time
}

// heartbeat is when the lease of job, whose mtime is mtime, was last
// heartbeat as far as this daemon's clock can tell: its mtime, unless
// that lies in the future, where no heartbeat of a host in step puts it
// (a heartbeat is a utimes to the writer's now). Then it is when this
// daemon first saw that mtime: a planted future mtime ages from then like
// any heartbeat, while a live worker on a host whose clock runs ahead
// moves its mtime at every heartbeat and so stays fresh. A record not
// looked at for two leases is dropped.
func (d *Daemon) heartbeat(job string, mtime time.Time) time.Time {
	now := time.Now()
	if !mtime.After(now) {
		return mtime
	}
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.future == nil {
		d.future = map[string]futureBeat{}
	}
	for j, b := range d.future {
		if now.Sub(b.last) > 2*d.cfg.Lease {
			delete(d.future, j)
		}
	}
	b, ok := d.future[job]
	if !ok || !b.mtime.Equal(mtime) {
		b = futureBeat{mtime: mtime, first: now}
	}
	b.last = now
	d.future[job] = b
	return b.first
}
