package spool

import (
	"errors"
	"os"
	"sync"
	"testing"
)

// An EventAppender numbers its events as AppendEvent does (the line
// number), whatever else appended lines in between: AppendEvent, a shell's
// plain line, a line a dying writer left without its newline, and after
// the file was replaced under it.
func TestEventAppenderSeqIsLineNumber(t *testing.T) {
	s := testSpool(t)
	a := s.NewEventAppender("j")
	defer a.Close()
	raw := func(text string) {
		f, err := os.OpenFile(s.Path("j.events"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
	}
	lines := func() int64 {
		f, err := os.Open(s.Path("j.events"))
		if err != nil {
			return 0
		}
		defer f.Close()
		n, _ := countLines(f)
		return n
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"appender", func() {}},
		{"appender again", func() {}},
		{"AppendEvent", func() {
			if _, err := s.AppendEvent("j", Event{Text: "other"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"shell line", func() { raw("plain text\n") }},
		{"half a line", func() { raw("no newline") }},
		{"after it", func() {}},
		{"replaced", func() {
			os.WriteFile(s.Path(".x"), []byte("a\nb\n"), 0o640)
			os.Rename(s.Path(".x"), s.Path("j.events"))
		}},
		{"shorter", func() {
			os.WriteFile(s.Path(".x"), []byte("a\n"), 0o640)
			os.Rename(s.Path(".x"), s.Path("j.events"))
		}},
	}
	for _, st := range steps {
		st.do()
		// What AppendEvent would number it: one more than countLines.
		want := lines() + 1
		ev, err := a.Append(Event{Text: st.name})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if ev.Seq != want {
			t.Fatalf("after %s: seq %d, want %d", st.name, ev.Seq, want)
		}
	}
}

// Concurrent appenders, cached and not, never share a seq.
func TestEventAppenderConcurrent(t *testing.T) {
	s := testSpool(t)
	a := s.NewEventAppender("j")
	defer a.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]bool{}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 30; k++ {
				var ev Event
				var err error
				if i%2 == 0 {
					ev, err = a.Append(Event{Text: "a"})
				} else {
					ev, err = s.AppendEvent("j", Event{Text: "b"})
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[ev.Seq] {
					t.Errorf("seq %d taken twice", ev.Seq)
				}
				seen[ev.Seq] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 180 {
		t.Fatalf("%d seqs, want 180", len(seen))
	}
}

// A symlink planted in place of the events file is refused, not followed.
func TestEventAppenderRefusesSymlink(t *testing.T) {
	s := testSpool(t)
	a := s.NewEventAppender("j")
	defer a.Close()
	if _, err := a.Append(Event{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir() + "/outside"
	os.WriteFile(out, nil, 0o640)
	os.Remove(s.Path("j.events"))
	if err := os.Symlink(out, s.Path("j.events")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(Event{Text: "two"}); err == nil {
		t.Fatal("appended through a symlink")
	} else if !errors.Is(err, ErrNotRegular) {
		t.Logf("refused: %v", err)
	}
	if b, _ := os.ReadFile(out); len(b) != 0 {
		t.Fatalf("the file outside got %q", b)
	}
}

// A last line left without its newline keeps its own number: the next
// event starts on a line of its own, whichever appender writes it.
func TestAppendAfterPartialLine(t *testing.T) {
	for _, name := range []string{"AppendEvent", "EventAppender"} {
		t.Run(name, func(t *testing.T) {
			s, err := Create(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			job := "j1"
			a := s.NewEventAppender(job)
			defer a.Close()
			appendOne := func(text string) Event {
				t.Helper()
				var ev Event
				var err error
				if name == "AppendEvent" {
					ev, err = s.AppendEvent(job, Event{Text: text})
				} else {
					ev, err = a.Append(Event{Text: text})
				}
				if err != nil {
					t.Fatal(err)
				}
				return ev
			}
			appendOne("one")
			f, err := os.OpenFile(s.Path(job+ExtEvents), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"type":"status","text":"cut of`)
			f.Close()
			if ev := appendOne("three"); ev.Seq != 3 {
				t.Errorf("after a partial line 2: seq %d, want 3", ev.Seq)
			}
			if ev := appendOne("four"); ev.Seq != 4 {
				t.Errorf("next: seq %d, want 4", ev.Seq)
			}
			evs, err := s.NewEventReader(job).Read()
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 4 {
				t.Fatalf("read %d events, want 4: %+v", len(evs), evs)
			}
			for i, ev := range evs {
				if ev.Seq != int64(i+1) {
					t.Errorf("line %d read with seq %d", i+1, ev.Seq)
				}
			}
			if evs[2].Text != "three" || evs[3].Text != "four" {
				t.Errorf("lines 3 and 4: %q, %q", evs[2].Text, evs[3].Text)
			}
		})
	}
}
