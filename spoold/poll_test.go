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

// settle makes the daemon's last look at the root older than rootSettle.
func settle(d *Daemon) { d.rootSeen.since = d.rootSeen.since.Add(-2 * rootSettle) }

// A poll reads the root only while it may have changed; a marker queued
// after the root settled changes its stamp and is found at the next poll,
// and so is one queued within the settle time of the last change (which,
// on a filesystem of whole seconds, may leave the stamp as it was).
func TestPollSeesChanges(t *testing.T) {
	d, s := pollDaemon(t, 10)
	d.poll()
	settle(d)
	d.poll() // settled: the root is not read
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	d.poll()
	if !d.q.has(job) {
		t.Fatal("a marker queued after the root settled was not found")
	}
	// A change whose stamp this daemon already holds (two changes in one
	// second over sftp): still read while within the settle time.
	stamp, _ := s.RootStamp()
	job2, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	d.rootSeen = sighting{stamp: stamp, since: time.Now()}
	d.rootSeen.stamp, _ = s.RootStamp()
	d.poll()
	if !d.q.has(job2) {
		t.Fatal("a marker queued within the settle time was not found")
	}
}

// BenchmarkDaemonPoll is one idle poll over 100,000 ended jobs (200,000
// names): settled, one stat of the root; "rescan", a listing of every
// name, as every poll was before.
func BenchmarkDaemonPoll(b *testing.B) {
	d, _ := pollDaemon(b, 100_000)
	d.poll()
	b.Run("settled", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			settle(d)
			d.poll()
		}
	})
	b.Run("rescan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d.rescan()
		}
	})
}
