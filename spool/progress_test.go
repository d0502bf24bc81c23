package spool

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The document a job's output can make is bounded once encoded: 64 plain
// lines of 8 KiB of \x01 made a document of 3.1 MB, JSON writing each
// byte as six.
func TestProgressEncodedBound(t *testing.T) {
	s := testSpool(t)
	ctl := strings.Repeat("\x01", MaxEventLine)
	for _, c := range []struct {
		name string
		ev   func(i int) Event
	}{
		{"control bytes", func(i int) Event { return Event{Type: EventStatus, Text: ctl} }},
		{"quotes", func(i int) Event { return Event{Type: EventStatus, Text: strings.Repeat(`"`, MaxEventLine)} }},
		{"line separators", func(i int) Event { return Event{Type: EventStatus, Text: strings.Repeat("\u2028", MaxEventLine)} }},
		{"questions", func(i int) Event {
			opts := make([]string, 2*MaxEventOptions)
			for j := range opts {
				opts[j] = ctl[:1000]
			}
			return Event{Type: EventQuestion, ID: ctl[:1000], Text: ctl, Options: opts, Worker: ctl[:1000], State: State(ctl[:100])}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Progress{Job: "j", Chat: "c", State: Running}
			for i := 1; i <= 3*MaxProgressEvents; i++ {
				ev := c.ev(i)
				ev.Seq = int64(i)
				p.Add(ev)
			}
			e := ctl
			p.Error = &e
			n, err := s.WriteProgressN(p)
			if err != nil {
				t.Fatal(err)
			}
			if n > MaxProgressSize {
				t.Errorf("the document is %d bytes; the bound is %d", n, MaxProgressSize)
			}
			got, err := s.ReadProgress("c")
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Events) == 0 || got.Events[len(got.Events)-1].Seq != 3*MaxProgressEvents {
				t.Errorf("the newest event was not kept: %d events", len(got.Events))
			}
			t.Logf("%d bytes, %d events", n, len(got.Events))
		})
	}
}

// FuzzClipJSON: whatever the string, its clip encodes within the bound
// (and the mark of a cut), and is the string's own beginning.
func FuzzClipJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "\x01\x02", `"\`, "\b\f\n\r\t", "\u2028\u2029", "é€😀", "\xff\xfe"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
		c := clipJSON(s, max)
		b, err := marshalLine(c) // "...", and a newline
		if err != nil {
			t.Fatal(err)
		}
		b = b[:len(b)-1]
		if enc := len(b) - 2; enc > max+len("…") {
			t.Errorf("clipJSON(%q, %d) = %q encodes in %d bytes", s, max, c, enc)
		}
		if c != s && !strings.HasPrefix(s, strings.TrimSuffix(c, "…")) || !utf8.ValidString(c) {
			t.Errorf("clipJSON(%q, %d) = %q", s, max, c)
		}
		if c == s {
			if enc := len(b) - 2; enc > max {
				t.Errorf("clipJSON(%q, %d) kept it whole, %d bytes encoded", s, max, enc)
			}
		}
	})
}
