package spool

import (
	"encoding/json"
	"errors"
	"slices"
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
		for i := 0; i < 3; i++ {
			p.Add(Event{Seq: p.Seq + 1, Type: EventAnswer})
		}
	})
}

func FuzzParseEventLine(f *testing.F) {
	for _, s := range []string{
		`{"seq":1,"at":1.5,"type":"status","text":"hi"}`,
		`{"type":"question","id":"q1","text":"ok?","options":["y","n"]}`,
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
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("cannot relay: %v", err)
		}
	})
}

func FuzzSplitName(f *testing.F) {
	for _, s := range []string{"a.json", ".a.json1", "a/b.ready", "x.y.done", "..ready", "nightly.1.json", "a.json.ready", "v1.2.3.running", "a..b.log"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		job, ext, ok := SplitName(name)
		if ok && (!ValidID(job) || job+ext != name) {
			t.Fatalf("SplitName(%q) = %q %q", name, job, ext)
		}
		// Every id, dots and all, with every suffix, splits back to
		// itself: a name is never read as another job's.
		if ValidID(name) {
			for _, e := range exts {
				if j, x, ok := SplitName(name + e); !ok || j != name || x != e {
					t.Fatalf("SplitName(%q) = %q %q %v", name+e, j, x, ok)
				}
			}
		}
	})
}

// FuzzTakenBy checks the one rule of "is this id taken": an id, dots and
// all, is taken by each of its state names, whether asked name by name
// (Submit, through the directory) or of a listing of the root
// (SubmitBatch), and by no other job's names. A batch split names at
// their first dot, so nightly.1.json never took nightly.1.
func FuzzTakenBy(f *testing.F) {
	for _, s := range []string{"nightly.1", "a", "a.json", "x.y.done", "01JDW3Q9ZC6X7H2M4T8R5N0KQA", "v1.2.3"} {
		f.Add(s, uint8(0), "nightly.json")
		f.Add(s, uint8(2), s+".events")
	}
	f.Fuzz(func(t *testing.T, id string, which uint8, other string) {
		if !ValidID(id) {
			return
		}
		name := id + stateExts[int(which)%len(stateExts)]
		for _, names := range [][]string{{name}, {other, name}, {name, other, id}} {
			listed := stateNames(names)
			if got := takenBy(id, func(n string) bool { _, ok := listed[n]; return ok }); got == "" {
				t.Fatalf("%q is not taken by a listing of %q", id, names)
			}
		}
		// other alone takes id only if it is one of id's state names.
		listed := stateNames([]string{other})
		got := takenBy(id, func(n string) bool { _, ok := listed[n]; return ok })
		job, ext, ok := SplitName(other)
		mine := ok && job == id && slices.Contains(stateExts, ext)
		if (got != "") != mine || got != "" && got != other {
			t.Fatalf("a listing of %q: %q taken by %q", other, id, got)
		}
	})
}
