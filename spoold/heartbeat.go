package spoold

import (
	"time"

	"github.com/vmspool/vmspool/spool"
)

// What a lease says of itself is believed only as far as this daemon's
// own lease allows: a lease is a document anyone who can write the spool
// can plant, and one with a lease_s of 10^9 seconds kept its job running
// and its chat busy for ever (docs/reliability.md, "Attacks"). Its
// heartbeat is judged by whether it moves, never by its time
// (liveness.go): a plant a year ahead dies a lease after it is first seen.

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
