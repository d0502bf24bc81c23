package ops

import (
	"sync/atomic"
	"time"
)

// epoch is the process's reference on the monotonic clock, so that a step
// of the wall clock (chrony correcting it) is never taken for a hang.
var epoch = time.Now()

// monoTime is a point on the monotonic clock that goroutines share without
// a lock: nanoseconds since epoch, plus one so that 0 means never stored.
type monoTime struct{ ns atomic.Int64 }

func (a *monoTime) Store(t time.Time) { a.ns.Store(int64(t.Sub(epoch)) + 1) }

func (a *monoTime) Load() time.Time { return epoch.Add(time.Duration(a.ns.Load() - 1)) }

// StoreIfZero stores t only if nothing was stored yet.
func (a *monoTime) StoreIfZero(t time.Time) { a.ns.CompareAndSwap(0, int64(t.Sub(epoch))+1) }
