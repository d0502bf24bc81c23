package spoold

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func newTestDaemon(t *testing.T) (*Daemon, *spool.Spool) {
	t.Helper()
	s, err := spool.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d, err := New(Config{Spool: s})
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// An inotify queue overflow loses events: the watch says so with a Look,
// which the daemon answers with a rescan that finds the markers no event
// told of.
func TestOverflowRescans(t *testing.T) {
	d, s := newTestDaemon(t)
	os.WriteFile(s.Path("lost.json"), []byte(`{"chat":"c","argv":["true"]}`), 0o640)
	os.WriteFile(s.Path("lost.ready"), nil, 0o640)
	changes := make(chan spool.Change)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.events(ctx, changes)
	if d.q.has("lost") {
		t.Fatal("known before any event")
	}
	changes <- spool.Change{Op: spool.Look, Err: spool.ErrOverflow}
	changes <- spool.Change{Name: "other.ready", Op: spool.Created} // taken once the Look was
	d.bg.Wait()                                                     // the listing, in the background
	if !d.q.has("lost") {
		t.Fatal("the rescan after an overflow did not find the marker")
	}
}

// Events are dispatched by name, with no directory read: a marker is
// queued, a lease remembered and forgotten, a temporary ignored.
func TestEventDispatch(t *testing.T) {
	d, s := newTestDaemon(t)
	os.WriteFile(s.Path("j.ready"), nil, 0o640)
	os.WriteFile(s.Path(".j.ready123"), nil, 0o640)
	d.event(spool.Change{Name: ".j.ready123", Op: spool.Created})
	if d.q.len() != 0 {
		t.Fatal("a temporary was queued")
	}
	d.event(spool.Change{Name: "j.ready", Op: spool.Created})
	if !d.q.has("j") {
		t.Fatal("marker not queued")
	}
	d.event(spool.Change{Name: "k.running", Op: spool.Created})
	if _, ok := d.running["k"]; !ok {
		t.Fatal("lease not remembered")
	}
	d.event(spool.Change{Name: "k.running", Op: spool.Removed})
	if _, ok := d.running["k"]; ok {
		t.Fatal("lease renamed away still remembered")
	}
	// A marker that is not a plain file goes to corrupt/.
	os.Mkdir(s.Path("d.ready"), 0o750)
	d.event(spool.Change{Name: "d.ready", Op: spool.Created})
	if _, err := os.Stat(s.Path("corrupt/d.ready.why")); err != nil {
		t.Errorf("a directory marker was not moved aside: %v", err)
	}
}

// The daemon's loop of timed work beats every second at least while it
// runs: the watchdog's sign that a spoold alive is not stuck.
func TestBeat(t *testing.T) {
	d, _ := newTestDaemon(t)
	d.cfg.Cgroup = CgroupOff
	var beats atomic.Int64
	d.cfg.Beat = func() { beats.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	time.Sleep(2500 * time.Millisecond) // a window: the beats in it are what is counted
	cancel()
	<-done
	if n := beats.Load(); n < 2 {
		t.Errorf("%d beats in 2.5 s; want one a second at least", n)
	}
}
