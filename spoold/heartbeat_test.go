package spoold

import (
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A lease's own lease_s is believed up to this daemon's lease, and no
// further.
func TestLeaseLife(t *testing.T) {
	d, _ := newTestDaemon(t) // --lease 30s
	for _, c := range []struct {
		leaseS float64
		want   time.Duration
	}{
		{10, 10 * time.Second},
		{30, 30 * time.Second},
		{1e9, 30 * time.Second},
		{1e300, 30 * time.Second},
		{0, 30 * time.Second},
		{-5, 30 * time.Second},
	} {
		if got := d.life(&spool.Lease{LeaseS: c.leaseS}); got != c.want {
			t.Errorf("lease_s %g: life %v; want %v", c.leaseS, got, c.want)
		}
	}
}
