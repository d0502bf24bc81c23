package spool

import (
	"encoding/json"
	"errors"
	"testing"
)

// The readers of the tree's documents take anything without panicking,
// and what they accept is what the rest of the code relies on.

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		`{"chat":"nightly","argv":["make","backup"]}`,
		`{"id":"j","chat":"c","created":1.5,"script":"echo hi","cwd":"/","env":{"A":"1"},"timeout":"45m","attempts":3}`,
		`{"chat":"c","argv":["x"],"script":"y"}`,
		`{"chat":"c","argv":["x"],"timeout":2700}`,
		`{}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sp, err := ParseSpec(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if !ValidID(sp.Chat) || (sp.Argv == nil) == (sp.Script == nil) || (sp.ID != "" && !ValidID(sp.ID)) {
			t.Fatalf("accepted an invalid spec: %+v", sp)
		}
		if sp.MaxTries() < 1 || sp.MaxTries() > MaxAttempts {
			t.Fatalf("tries %d", sp.MaxTries())
		}
		// What was accepted survives a round trip.
		out, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSpec(out); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
	})
}

func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{
		`{"job":"j","chat":"c","seq":3,"updated":1700000000.12,"started":1700000000,"done":false,"state":"running","status":"hi","events":[{"seq":3,"type":"status","text":"hi"}],"question":null,"exit":null,"error":null}`,
		`{"question":{"id":"q","text":"ok?","options":["a","b"],"asked":1}}`,
		`{"question":{"id":"x $(touch /tmp/p) #","text":"ok?"},"events":[{"type":"question","id":"a;b"}]}`,
		`{"chat":"../x"}`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProgress(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if p.Chat != "" && !ValidID(p.Chat) {
			t.Fatalf("accepted chat %q", p.Chat)
		}
		if q := p.Question; q != nil && q.ID != "" && !ValidID(q.ID) {
			t.Fatalf("accepted question id %q", q.ID)
		}
		for _, ev := range p.Events {
			if ev.ID != "" && !ValidID(ev.ID) {
				t.Fatalf("accepted event id %q", ev.ID)
			}
		}
		for i := 0; i < 3; i++ {
			p.Add(Event{Seq: p.Seq + 1, Type: EventAnswer})
		}
	})
}

func FuzzParseEventLine(f *testing.F) {
	for _, s := range []string{
		`{"seq":1,"at":1.5,"type":"status","text":"hi"}`,
		`{"type":"question","id":"q1","text":"ok?","options":["y","n"]}`,
		`{"type":"question","id":"x $(touch /tmp/p) #","text":"ok?"}`,
		"plain text", "\xff\xfe", `{"text":` + "\"\xff\"}", "",
	} {
		f.Add([]byte(s), int64(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, seq int64) {
		ev := ParseEventLine(b, seq)
		if ev.Seq != seq || ev.Type == "" {
			t.Fatalf("event %+v from %q", ev, b)
		}
		if len(ev.Text) > MaxEventText+len("…") {
			t.Fatalf("text of %d bytes", len(ev.Text))
		}
		// An id goes into a command line shown to people: an id or nothing.
		if ev.ID != "" && !ValidID(ev.ID) {
			t.Fatalf("event id %q", ev.ID)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("cannot relay: %v", err)
		}
	})
}

func FuzzSplitName(f *testing.F) {
	for _, s := range []string{"a.json", ".a.json1", "a/b.ready", "x.y.done", "..ready"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		job, ext, ok := SplitName(name)
		if ok && (!ValidID(job) || job+ext != name) {
			t.Fatalf("SplitName(%q) = %q %q", name, job, ext)
		}
	})
}
