package spoold

import (
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A heartbeat is judged by whether it moves, never by its time. A lease's
// mtime is written by its holder's clock (or its filesystem client's), and
// another host's clock may be off by any amount: a host whose clock runs
// behind writes heartbeats that look old, one that runs ahead reads every
// heartbeat as old, and either would take over jobs that are alive. So a
// daemon keeps, for each lease it looks at, what it last saw of the file
// and since when by its own monotonic clock; a lease is silent for as long
// as that has not changed. A worker whose heartbeat this daemon has seen
// still for a whole lease is dead or cut off, and a cut-off worker's fence
// has ended its jobs after half a lease (docs/spoold.md, "Cut off"),
// whatever any clock says. The price: a daemon that has just started
// takes over another host's dead worker's jobs only after watching them a
// lease.

// sighting is what a daemon last saw of one lease, and since when.
type sighting struct {
	stamp  spool.FileStamp
	since  time.Time // monotonic: when stamp was first seen
	looked time.Time // when it was last looked at
}

// silence is how long what is seen under key (a job, for recovery; a
// chat's look at a job's lease keeps its own) has shown stamp, as this
// daemon watched it: 0 the first time, or when it changed.
func (d *Daemon) silence(key string, stamp spool.FileStamp) time.Duration {
	d.smu.Lock()
	defer d.smu.Unlock()
	now := time.Now()
	if d.sightings == nil {
		d.sightings = make(map[string]*sighting)
	}
	if now.Sub(d.swept) > 2*d.cfg.Lease {
		// Leases not looked at for a while are gone (ended, taken over).
		for j, s := range d.sightings {
			if now.Sub(s.looked) > 2*d.cfg.Lease {
				delete(d.sightings, j)
			}
		}
		d.swept = now
	}
	s := d.sightings[key]
	if s == nil || s.stamp != stamp {
		d.sightings[key] = &sighting{stamp: stamp, since: now, looked: now}
		return 0
	}
	s.looked = now
	return now.Sub(s.since)
}
