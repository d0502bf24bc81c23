package spoold

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// pollDaemon is a daemon in poll mode over a spool holding ended jobs
// left until gc (a spec and a result each).
func pollDaemon(tb testing.TB, ended int) (*Daemon, *spool.Spool) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "spool")
	s, err := spool.Create(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	for i := 0; i < ended; i++ {
		id := fmt.Sprintf("j%07d", i)
		os.WriteFile(filepath.Join(dir, id+".json"), []byte(`{"chat":"c","argv":["true"]}`), 0o640)
		os.WriteFile(filepath.Join(dir, id+".done"), []byte(`{"job":"`+id+`","state":"done"}`), 0o640)
	}
	d, err := New(Config{Spool: s, Poll: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return d, s
}

// The root is listed when it moved since the last listing began (or
// within the settle of when that was seen), whatever forces it, never
// twice at once, and no sooner than its share of the time allows.
func TestListingWhenMoved(t *testing.T) {
	d, s := pollDaemon(t, 10)
	d.firstListing()
	count := func() int {
		d.bg.Wait()
		d.ls.mu.Lock()
		defer d.ls.mu.Unlock()
		return d.ls.count
	}
	// due ends the last listing's share of the time.
	due := func() {
		d.ls.mu.Lock()
		d.ls.next = time.Time{}
		d.ls.mu.Unlock()
	}
	settle := func() {
		due()
		d.ls.mu.Lock()
		d.ls.since = d.ls.since.Add(-2 * spool.WatchSettle)
		d.ls.mu.Unlock()
	}
	settle()
	d.lookRoot(false)
	if n := count(); n != 1 {
		t.Fatalf("%d listings; an unforced look at a root that did not move listed it", n)
	}
	due()
	d.lookRoot(true)
	if n := count(); n != 2 {
		t.Fatalf("%d listings; a forced look did not list", n)
	}
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	settle()
	d.lookRoot(false)
	if n := count(); n != 3 || !d.q.has(job) {
		t.Fatalf("%d listings, queued %v; the root moved and was not listed", n, d.q.has(job))
	}
	// Seen a moment ago: within the settle, listed again, for a change
	// the stamp may not show.
	due()
	d.lookRoot(false)
	if n := count(); n != 4 {
		t.Fatalf("%d listings; within the settle, the root was not listed", n)
	}

	// One at a time: a look while a listing runs is made after it.
	due()
	d.ls.mu.Lock()
	d.ls.running = true
	d.ls.mu.Unlock()
	d.lookRoot(true)
	if n := count(); n != 4 {
		t.Fatalf("%d listings; two at once", n)
	}
	d.listNow() // the one running ends, and the look waits its share
	waitCount := func(want int, what string) {
		deadline := time.Now().Add(10 * time.Second)
		for count() != want {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(10 * time.Millisecond) // polling for the timer's listing
		}
	}
	waitCount(6, "the look made while a listing ran was lost")

	// Put off while the last one's share runs, then made.
	d.ls.mu.Lock()
	d.ls.next = time.Now().Add(200 * time.Millisecond)
	d.ls.mu.Unlock()
	d.lookRoot(true)
	if n := count(); n != 6 {
		t.Fatalf("%d listings; one was made within the last one's share", n)
	}
	waitCount(7, "the listing put off was never made")
}

// BenchmarkDaemonPoll is one idle poll over 100,000 ended jobs (200,000
// names): settled, one stat of the root (the watch's poll, spool.Watch);
// "rescan", a listing of every name, as every poll was before.
func BenchmarkDaemonPoll(b *testing.B) {
	d, s := pollDaemon(b, 100_000)
	b.Run("settled", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.DirStamp("")
		}
	})
	b.Run("rescan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d.rescan()
		}
	})
}
