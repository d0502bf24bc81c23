package watchd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// lineWriter hands each line written to it to a channel.
type lineWriter chan string

func (w lineWriter) Write(b []byte) (int, error) {
	w <- strings.TrimSuffix(string(b), "\n")
	return len(b), nil
}

// BenchmarkFollowLatencyInProcess: a flushed document to the line Follow
// writes, in one process (no pipe, no second process), with inotify and
// with --poll 1s.
func BenchmarkFollowLatencyInProcess(b *testing.B) {
	measure := func(poll time.Duration, n int) []time.Duration {
		s := newTestSpool(b)
		lines := make(lineWriter, 16)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go Follow(ctx, FollowConfig{Spool: s, Chat: "c", Job: "j", Poll: poll, Out: lines})
		p := &spool.Progress{Job: "j", Chat: "c", State: spool.Running}
		var lat []time.Duration
		for i := 0; i <= n; i++ {
			// The point: events at moments spread over the poll's period
			// (a latency is where in it an event falls), or apart.
			if poll > 0 {
				time.Sleep(time.Duration(i*7919%1000) * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			text := fmt.Sprintf("e%d", i)
			t0 := time.Now()
			p.Add(spool.Event{Seq: p.Seq + 1, Type: spool.EventStatus, Text: text})
			if err := s.WriteProgress(p); err != nil {
				b.Fatal(err)
			}
			for l := range lines {
				if l == text {
					break
				}
			}
			if i > 0 { // the first one waits for the start
				lat = append(lat, time.Since(t0))
			}
		}
		return lat
	}
	notify, poll := measure(0, 300), measure(time.Second, 8)
	pct := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	b.ReportMetric(float64(pct(notify, .5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(notify, .99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(pct(poll, .5).Microseconds()), "poll1s-p50-µs")
	b.ReportMetric(float64(pct(poll, .5))/float64(pct(notify, .5)), "ratio-p50")
}

// BenchmarkWriteProgress is the floor under every latency above: the
// daemon's flush itself.
func BenchmarkWriteProgress(b *testing.B) {
	s := newTestSpool(b)
	p := &spool.Progress{Job: "j", Chat: "c", State: spool.Running}
	for i := 0; i < 64; i++ {
		p.Add(spool.Event{Seq: int64(i + 1), Type: spool.EventStatus, Text: "a status line of some length"})
	}
	for b.Loop() {
		s.WriteProgress(p)
	}
}

// BenchmarkTallyFeed: the bookkeeping of one document of 64 events with
// one new.
func BenchmarkTallyFeed(b *testing.B) {
	p := &spool.Progress{Job: "j", Chat: "c", State: spool.Running, Updated: 2000}
	for i := 0; i < 64; i++ {
		p.Add(spool.Event{Seq: int64(i + 1), Type: spool.EventStatus, Text: "a status line of some length"})
	}
	f := NewTally(Guards{Began: 1000})
	f.Feed(p)
	for b.Loop() {
		f.last--
		f.Feed(p)
	}
}
