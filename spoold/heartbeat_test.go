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

// A heartbeat in the future counts from when it was first seen: one
// that never moves ages like any other, one that moves stays fresh.
func TestFutureHeartbeat(t *testing.T) {
	d, _ := newTestDaemon(t)
	past := time.Now().Add(-time.Minute)
	if got := d.heartbeat("j", past); !got.Equal(past) {
		t.Errorf("a past heartbeat became %v", got)
	}
	ahead := time.Now().Add(365 * 24 * time.Hour)
	first := d.heartbeat("j", ahead)
	if first.After(time.Now()) {
		t.Fatalf("a heartbeat a year ahead is believed: %v", first)
	}
	time.Sleep(20 * time.Millisecond) // the second look must be later than the first
	if again := d.heartbeat("j", ahead); !again.Equal(first) {
		t.Errorf("the same future heartbeat, seen again, is %v; want when first seen, %v", again, first)
	}
	moved := d.heartbeat("j", ahead.Add(time.Second))
	if !moved.After(first) {
		t.Errorf("a future heartbeat that moved is %v; want a fresh one after %v", moved, first)
	}
}
