package spoold

import (
	"sync"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// listingShare bounds the time spent listing the root: after a listing
// that took T, the next one starts no sooner than (listingShare-1)·T
// later, so that at most 1/listingShare of the time goes to listing. On a
// local disk a listing takes milliseconds and the bound is never felt; on
// a network filesystem over a long history (2,000,000 names on GlusterFS:
// about 25 s) it keeps a busy daemon from listing without end.
const listingShare = 10

// listing is when the root is read whole (rescan). Every listing is asked
// for by a Look of the root (the watch's: an overflow, a replaced root,
// the safety net, the poll's moved stamp), runs in the background, one at
// a time, so that nothing else waits for it (a new job rung at the
// doorbell, events, recoveries), and is put off while the last one's
// share of the time is not over.
type listing struct {
	mu      sync.Mutex
	want    bool // a Look asked for a listing not made yet
	force   bool // made even if the root did not move: events were lost
	running bool
	stopped bool
	next    time.Time   // no listing starts before
	timer   *time.Timer // the listing put off, until next
	// The root's stamp at the start of the last listing, and since when
	// it was seen: an unforced Look of a root that did not move since
	// (and settled, spool.WatchSettle) lists nothing.
	seen  spool.DirStamp
	since time.Time
	count int // listings made, for tests
}

// lookRoot asks for a listing of the root. force: events were lost, or
// the daemon has no other way to retry what failed (with inotify, the
// safety net lists whatever the stamp says); otherwise it is made only if
// the root moved since the last listing began.
func (d *Daemon) lookRoot(force bool) {
	l := &d.ls
	l.mu.Lock()
	l.want = true
	l.force = l.force || force
	l.mu.Unlock()
	d.listIfDue()
}

// listIfDue starts the listing asked for, if its time has come, in the
// background; or sets a timer for when it has.
func (d *Daemon) listIfDue() {
	l := &d.ls
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.want || l.running || l.stopped {
		return
	}
	if wait := time.Until(l.next); wait > 0 {
		if l.timer == nil {
			l.timer = time.AfterFunc(wait, func() {
				l.mu.Lock()
				l.timer = nil
				l.mu.Unlock()
				d.listIfDue()
			})
		}
		return
	}
	st, err := d.s.DirStamp("")
	now := time.Now()
	if !l.force && err == nil && st == l.seen && now.Sub(l.since) >= spool.WatchSettle {
		l.want = false
		return
	}
	if err != nil || st != l.seen {
		l.seen, l.since = st, now
	}
	l.want, l.force, l.running = false, false, true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.listNow()
	}()
}

// listNow lists the root, timing the listing for the next one's start.
// The caller marked it running.
func (d *Daemon) listNow() {
	l := &d.ls
	began := time.Now()
	ok := d.rescan()
	took := time.Since(began)
	l.mu.Lock()
	l.running = false
	l.count++
	l.next = time.Now().Add((listingShare - 1) * took)
	if !ok {
		// Read again once its share allows.
		l.want, l.force = true, true
	}
	l.mu.Unlock()
	// A Look that came while it ran (the root moved meanwhile) is made
	// once its share allows.
	d.listIfDue()
}

// firstListing is the listing at start, made before the daemon serves.
func (d *Daemon) firstListing() {
	l := &d.ls
	l.mu.Lock()
	l.seen, _ = d.s.DirStamp("")
	l.since = time.Now()
	l.running = true
	l.mu.Unlock()
	d.listNow()
}

// stopListing makes no listing start from now on.
func (d *Daemon) stopListing() {
	l := &d.ls
	l.mu.Lock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
}
