package ops

import (
	"path/filepath"
	"testing"
	"time"
)

// The daemons call these on their hot paths (a flush per event batch, a
// decision per script): they must cost next to nothing.
func BenchmarkSpooldFlushed(b *testing.B) {
	m := NewSpooldMetrics(NewRegistry("spoold", false))
	for b.Loop() {
		m.Flushed()
	}
}

func BenchmarkSpooldEnded(b *testing.B) {
	m := NewSpooldMetrics(NewRegistry("spoold", false))
	for b.Loop() {
		m.Ended("done", 3*time.Second)
	}
}

func BenchmarkGateDecision(b *testing.B) {
	m := NewGateMetrics(NewRegistry("vmgate", false))
	for b.Loop() {
		m.Decision(false, "git-write", "push", time.Millisecond)
	}
}

// BenchmarkWriteTextfile is one write of spoold's textfile, every 15 s.
func BenchmarkWriteTextfile(b *testing.B) {
	reg := NewRegistry("spoold", false)
	m := NewSpooldMetrics(reg)
	NewGateMetrics(reg)
	m.Ended("done", time.Second)
	path := filepath.Join(b.TempDir(), "spoold.prom")
	for b.Loop() {
		if err := WriteTextfile(path, reg); err != nil {
			b.Fatal(err)
		}
	}
}
