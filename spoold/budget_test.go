package spoold

import (
	"testing"
	"time"
)

// What the progress budget lets through over a span is bounded, whatever
// the document's size and however often a flush is asked for; a small
// document asked for every 20 ms is never held back.
func TestProgressBudget(t *testing.T) {
	for _, c := range []struct {
		name    string
		size    int
		every   time.Duration
		heldOff bool
	}{
		{"largest documents every 20 ms", progressBurst, 20 * time.Millisecond, true},
		{"100 KiB every 20 ms", 100 << 10, 20 * time.Millisecond, true},
		{"10 KiB every 20 ms", 10 << 10, 20 * time.Millisecond, false},
		{"1 KiB every millisecond", 1 << 10, time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b budget
			now := time.Unix(1e9, 0)
			const span = 10 * time.Second
			written, held := 0, 0
			for end := now.Add(span); now.Before(end); now = now.Add(c.every) {
				if b.wait(now) > 0 {
					held++
					continue
				}
				b.spend(c.size, now)
				written += c.size
			}
			if limit := progressBurst + int(span.Seconds()*progressRate) + c.size; written > limit {
				t.Errorf("%d bytes written in %v; the bound is %d", written, span, limit)
			}
			if (held > 0) != c.heldOff {
				t.Errorf("%d flushes held off", held)
			}
		})
	}
}
