package spool

import "time"

// SetClockOffset moves this Spool's clock by d: every time it writes into
// the tree (a heartbeat's mtime, a lease's claim, a progress document's
// and a result's stamps) is its host's clock plus d. It plays, in tests,
// a host whose clock is off (Go's clock does not heed libfaketime), and
// is set only by spoold's test-only VMSPOOL_TEST_CLOCK_OFFSET
// (docs/spoold.md, "Clocks"). Set it before the Spool is shared.
func (s *Spool) SetClockOffset(d time.Duration) { s.clockOffset = d }

// Now is this Spool's clock: the host's, moved by SetClockOffset.
func (s *Spool) Now() time.Time { return time.Now().Add(s.clockOffset) }
