package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The readers of the documents on disk (lease, marker, result, answer, an
// events file read in pieces) take whatever a file holds without a panic,
// refuse what does not parse with ErrCorrupt, and what they accept is what
// the daemons rely on. Seed corpora: testdata/fuzz/<target>/.

func fuzzSpool(f *testing.F) *Spool {
	f.Helper()
	s, err := Create(filepath.Join(f.TempDir(), "spool"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s
}

func fuzzWrite(t *testing.T, s *Spool, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(s.Path(name), b, FileMode); err != nil {
		t.Fatal(err)
	}
}

func FuzzReadLease(f *testing.F) {
	for _, s := range []string{
		`{"job":"j","worker":"w","host":"h","pid":1,"claimed":1.5,"attempt":1,"lease_s":30}`,
		`{"worker":"w","attempt":-3,"first_attempt":9}`, `{"worker":""}`, ``, `[]`, `{"pid":"x"}`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzSpool(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzWrite(t, s, "j.running", b)
		l, fi, err := s.ReadLease("j")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || fi == nil {
				t.Fatalf("error %v (info %v); want ErrCorrupt with the file's info", err, fi)
			}
			return
		}
		if l.Worker == "" {
			t.Fatalf("accepted a lease without a worker: %q", b)
		}
		_ = l.Tries()
		_ = l.Duration()
		if !l.Same(l) {
			t.Fatalf("a lease is not the same claim as itself: %+v", l)
		}
	})
}

// FuzzClaimMarker: whatever a marker holds (nothing, a recovered lease, a
// requeued result, garbage), its claim makes an attempt of at least 1
// within a budget that started at or before it, and the lease written is
// read back as written.
func FuzzClaimMarker(f *testing.F) {
	for _, s := range []string{
		``, `{"job":"j","worker":"w","host":"h","pid":1,"attempt":2,"first_attempt":1}`,
		`{"job":"j","chat":"c","state":"failed","attempt":3,"worker":"w"}`,
		`{"worker":"w","attempt":9223372036854775807}`, `{"state":"done","attempt":9223372036854775807}`,
		`{"worker":"w","attempt":5,"first_attempt":9}`, `not json`, `{"attempt":"2"}`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzSpool(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		os.Remove(s.Path("j.running"))
		fuzzWrite(t, s, "j.ready", b)
		m, err := s.ReadMarker("j")
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := s.Claim("j", Lease{Worker: "me", Host: "h", PID: 1, LeaseS: 30})
		if err != nil || l == nil {
			t.Fatalf("claim of a marker holding %q: %v %v", b, l, err)
		}
		if l.Attempt < 1 || l.First < 1 || l.First > l.Attempt || l.Tries() < 1 {
			t.Fatalf("marker %q: attempt %d, first %d, tries %d", b, l.Attempt, l.First, l.Tries())
		}
		if m.Attempt != l.Attempt {
			t.Fatalf("marker %q: ReadMarker says attempt %d, the claim made %d", b, m.Attempt, l.Attempt)
		}
		back, _, err := s.ReadLease("j")
		if err != nil || !back.Same(l) {
			t.Fatalf("lease read back %+v %v, want %+v", back, err, l)
		}
	})
}

func FuzzReadResult(f *testing.F) {
	for _, s := range []string{
		`{"job":"j","chat":"c","state":"done","exit":0,"error":null,"started":1,"finished":2,"attempt":1}`,
		`{"state":"failed","exit":null,"error":"worker w died"}`, `{"exit":"x"}`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzSpool(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzWrite(t, s, "j.failed", b)
		r, err := s.ReadResult("j", Failed)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v; want ErrCorrupt", err)
			}
			return
		}
		if r == nil {
			t.Fatal("nil result without an error")
		}
	})
}

func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		`{"job":"j","question":"q1","answer":"yes","at":1.5}`, `{"answer":123}`, `{"question":null}`, ``, `"yes"`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzSpool(f)
	if err := os.MkdirAll(s.Path("chats/c"), DirMode); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzWrite(t, s, "chats/c/answer.json", b)
		a, err := s.ReadAnswer("c")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v; want ErrCorrupt", err)
			}
			return
		}
		if a == nil {
			t.Fatal("nil answer without an error")
		}
	})
}

// FuzzEventReader: an events file read as it grows, cut anywhere, gives
// the same events as the whole file read at once: one per complete line,
// numbered 1, 2, 3... whatever the lines hold.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("{\"type\":\"status\",\"text\":\"a\"}\nplain line\n{\"type\":\"question\",\"id\":\"q\"}\n"), uint16(7))
	f.Add([]byte("no newline at the end"), uint16(3))
	f.Add([]byte("\n\n\r\n\xff\xfe\n{\"seq\":99}\n"), uint16(1))
	f.Add([]byte("{\"text\":\"split"), uint16(0))
	s := fuzzSpool(f)
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		os.Remove(s.Path("j.events"))
		whole := func() []Event {
			fuzzWrite(t, s, "j.events", b)
			evs, err := s.NewEventReader("j").Read()
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}()
		os.Remove(s.Path("j.events"))
		k := int(cut) % (len(b) + 1)
		r := s.NewEventReader("j")
		fuzzWrite(t, s, "j.events", b[:k])
		first, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		fa, err := os.OpenFile(s.Path("j.events"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fa.Write(b[k:])
		fa.Close()
		rest, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		pieces := append(first, rest...)
		if n := bytes.Count(b, []byte("\n")); len(whole) != n {
			t.Fatalf("%d events from %d lines", len(whole), n)
		}
		if len(pieces) != len(whole) {
			t.Fatalf("read in two pieces (cut at %d): %d events, at once %d", k, len(pieces), len(whole))
		}
		for i := range whole {
			w, p := whole[i], pieces[i]
			if w.Seq != int64(i+1) || p.Seq != w.Seq || p.Type != w.Type || p.Text != w.Text || p.ID != w.ID {
				t.Fatalf("event %d: at once %+v, in pieces %+v", i+1, w, p)
			}
		}
		if r.Seq() != int64(len(whole)) {
			t.Fatalf("Seq %d after %d events", r.Seq(), len(whole))
		}
	})
}
