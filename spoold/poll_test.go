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
