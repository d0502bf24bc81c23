package watchd

import (
	"bytes"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

// FuzzFollowDocs feeds a Follower the documents of each line of the input,
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
		fl := NewFollower(Guards{Began: 1000, Job: job})
		var last int64
		ended := false
		for _, line := range bytes.Split(in, []byte("\n")) {
			doc, err := spool.ParseProgress(line)
			if err != nil {
				continue
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
			t.Fatalf("ended %v, Follower says %v", ended, fl.Ended())
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
