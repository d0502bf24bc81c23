package watchd

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

// FuzzFollowDocs feeds a Tally the documents of each line of the input,
// as the Hub would, and checks what must hold whatever the documents say:
// no panic, events said in rising seq order and each once, the End at most
// once and last.
func FuzzFollowDocs(f *testing.F) {
	f.Add([]byte(`{"job":"j","updated":1001,"seq":2,"events":[{"seq":1,"type":"status","text":"a"},{"seq":2,"type":"status","text":"b"}]}
{"job":"j","updated":1002,"seq":3,"done":true,"state":"done","exit":0,"events":[{"seq":3,"type":"end"}]}`), "")
	f.Add([]byte(`{"job":"old","updated":900,"done":true,"state":"done"}
{"job":"new","updated":1001,"seq":1,"question":{"id":"q","text":"ok?","options":["y","n"]},"events":[{"seq":1,"type":"question","id":"q","text":"ok?"}]}`), "new")
	f.Add([]byte(`{"job":"j","updated":1001,"seq":99,"events":[{"seq":70,"type":"status"},{"seq":5},{"seq":-1}]}
not json
{"job":"j","updated":"x"}`), "j")
	f.Fuzz(func(t *testing.T, in []byte, job string) {
		if job != "" && !spool.ValidID(job) {
			job = ""
		}
		fl := NewTally(Guards{Began: 1000, Job: job})
		var last int64
		ended := false
		// A stream's tally takes a few outputs at a time and feeds the
		// document again for the rest; what holds for Feed holds for it.
		bounded := NewTally(Guards{Began: 1000, Job: job})
		var blast int64
		bended := false
		budget := len(in)%3 + 1
		for _, line := range bytes.Split(in, []byte("\n")) {
			doc, err := spool.ParseProgress(line)
			if err != nil {
				continue
			}
			for turn := 0; ; turn++ {
				took := 0
				complete := bounded.FeedFunc(doc, func(o Output) bool {
					if took == budget {
						return false
					}
					took++
					if bended {
						t.Fatalf("bounded: output after the end: %+v", o)
					}
					if o.Kind == End {
						bended = true
					}
					if o.Event != nil && o.Kind != Question {
						if o.Seq <= blast {
							t.Fatalf("bounded: event seq %d after %d", o.Seq, blast)
						}
						blast = o.Seq
					}
					return true
				})
				if complete {
					break
				}
				if took == 0 || turn > 1000 {
					t.Fatalf("bounded: no progress on a document")
				}
			}
			for _, o := range fl.Feed(doc) {
				if ended {
					t.Fatalf("output after the end: %+v", o)
				}
				switch o.Kind {
				case End:
					ended = true
				case Status, Note, Answer:
					if o.Event == nil {
						break // a status-only document's status
					}
					if o.Seq <= last {
						t.Fatalf("event seq %d after %d", o.Seq, last)
					}
					last = o.Seq
				case Gap:
					if o.Skipped <= 0 {
						t.Fatalf("gap of %d", o.Skipped)
					}
				}
				if job != "" && o.Job != job {
					t.Fatalf("output of job %q while following %q", o.Job, job)
				}
			}
		}
		if ended != fl.Ended() {
			t.Fatalf("ended %v, Tally says %v", ended, fl.Ended())
		}
		if bended != ended || blast != last {
			t.Fatalf("bounded tally: ended %v, last %d; unbounded: ended %v, last %d", bended, blast, ended, last)
		}
	})
}

// FuzzParseEventID checks that a Last-Event-ID either parses to what
// EventID would write, or is refused.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"", "0", "12", "12.end", "-1", "x", "9999999999999999999", " 3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		last, ended, ok := ParseEventID(id)
		if !ok {
			return
		}
		if last < 0 {
			t.Fatalf("negative seq %d from %q", last, id)
		}
		kind := Status
		if ended {
			kind = End
		}
		back := EventID(Output{Kind: kind, Seq: last})
		l2, e2, ok2 := ParseEventID(back)
		if !ok2 || l2 != last || e2 != ended {
			t.Fatalf("%q -> %d %v -> %q -> %d %v", id, last, ended, back, l2, e2)
		}
	})
}

// FuzzBoundedSSE checks the stream's bound: the reckoned size is never
// below what encoding/json writes, and a bounded event fits its bound
// whatever its texts hold, repeated to the longest an event may be.
func FuzzBoundedSSE(f *testing.F) {
	f.Add("plain", "\x01\x02<>&\"\\", "\u2028\xff\xfe")
	f.Add("\x01", "é", "")
	f.Fuzz(func(t *testing.T, text, opt, qtext string) {
		if b, _ := json.Marshal(text); jsonSize(text) < len(b) {
			t.Fatalf("jsonSize(%q) = %d; encoding/json writes %d", text, jsonSize(text), len(b))
		}
		if text != "" {
			text = strings.Repeat(text, spool.MaxEventText/len(text)+1)[:spool.MaxEventText]
		}
		ev := &spool.Event{Seq: 3, Type: spool.EventQuestion, Text: text, ID: "q1", Options: slices.Repeat([]string{opt}, 16)}
		o := Output{Kind: Question, Job: "j", Seq: 3, Text: text, Event: ev,
			Question: &spool.Question{ID: "q1", Text: qtext, Options: ev.Options}}
		if n := len(SSE(o)); sseSize(o) < n {
			t.Fatalf("sseSize %d < %d", sseSize(o), n)
		}
		if b := BoundedSSE(o, MaxStreamWrite); len(b) > MaxStreamWrite {
			t.Fatalf("bounded event of %d bytes; bound %d", len(b), MaxStreamWrite)
		}
	})
}
