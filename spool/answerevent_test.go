package spool

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// Writers racing to append one question's answer (spoold's relay and
// `spool ask`, each from its own open file) write it once, while the job
// appends its own lines; every seq is still the line number.
func TestAppendAnswerOnce(t *testing.T) {
	s := testSpool(t)
	if _, err := s.AppendEvent("j", Event{Type: EventQuestion, ID: "q1", Text: "go on?"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			ev, appended, err := s.AppendAnswer("j", Event{Type: EventAnswer, ID: "q1", Text: "yes"})
			if err != nil || ev.ID != "q1" || ev.Text != "yes" || ev.Seq == 0 {
				t.Errorf("AppendAnswer = %+v, %v", ev, err)
			}
			if appended {
				mu.Lock()
				wrote++
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.AppendEvent("j", Event{Text: "working"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	evs, err := s.NewEventReader("j").Read()
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("line %d has seq %d", i+1, ev.Seq)
		}
		if ev.Type == EventAnswer {
			answers++
		}
	}
	if wrote != 1 || answers != 1 || len(evs) != 10 {
		t.Errorf("%d writers said they appended, %d answer events in %d lines; want 1, 1 in 10", wrote, answers, len(evs))
	}
	// Another question's answer is its own.
	if _, appended, err := s.AppendAnswer("j", Event{Type: EventAnswer, ID: "q2", Text: "no"}); !appended || err != nil {
		t.Errorf("q2: appended %v, %v", appended, err)
	}
}

// After a line a shell left without its newline, the answer starts a line
// of its own, numbered after it; an answer written by hand counts.
func TestAppendAnswerAfterPartialLine(t *testing.T) {
	s := testSpool(t)
	os.WriteFile(s.Path("j.events"), []byte(`{"type":"answer","id":"q0","text":"by hand"}`+"\nhalf a line"), FileMode)
	if _, appended, _ := s.AppendAnswer("j", Event{Type: EventAnswer, ID: "q0", Text: "again"}); appended {
		t.Error("an answer written by hand was answered again")
	}
	ev, appended, err := s.AppendAnswer("j", Event{Type: EventAnswer, ID: "q1", Text: "yes"})
	if err != nil || !appended || ev.Seq != 3 {
		t.Fatalf("AppendAnswer = %+v, %v, %v; want seq 3", ev, appended, err)
	}
	evs, _ := s.NewEventReader("j").Read()
	if len(evs) != 3 || evs[1].Text != "half a line" || evs[2].Type != EventAnswer || evs[2].Seq != 3 {
		t.Errorf("events: %+v", evs)
	}
}

func TestAppendAnswerRefuses(t *testing.T) {
	s := testSpool(t)
	for _, ev := range []Event{{Type: EventStatus, ID: "q1"}, {Type: EventAnswer, ID: "../q"}, {Type: EventAnswer}} {
		if _, _, err := s.AppendAnswer("j", ev); err == nil {
			t.Errorf("%+v: appended", ev)
		}
	}
	if _, _, err := s.AppendAnswer("../j", Event{Type: EventAnswer, ID: "q1"}); err == nil {
		t.Error("an invalid job id was taken")
	}
}

// BenchmarkAppendAnswer is the look before the append over the events a
// job may reach (--max-events, 64 MiB), the answer not among them: what
// a writer holds the events' lock for.
func BenchmarkAppendAnswer(b *testing.B) {
	s := testSpool(b)
	line := []byte(`{"seq":1,"at":1700000000.5,"type":"status","text":"` + strings.Repeat("x", 200) + `"}` + "\n")
	f, err := os.Create(s.Path("j.events"))
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < 64<<20; n += len(line) {
		f.Write(line)
	}
	f.Close()
	i := 0
	for b.Loop() {
		i++
		if _, appended, err := s.AppendAnswer("j", Event{Type: EventAnswer, ID: fmt.Sprintf("q%d", i), Text: "yes"}); err != nil || !appended {
			b.Fatal(appended, err)
		}
	}
}

// findAnswer sees an events file as a reader does: the same answer (the
// first of the question's), and the lines as an append counts them.
func FuzzFindAnswer(f *testing.F) {
	f.Add([]byte(`{"type":"answer","id":"q1","text":"yes"}`+"\n"), "q1")
	f.Add([]byte("half\n{\"type\":\"answer\",\"id\":\"q1\"}"), "q1")
	f.Add([]byte(`{"type":"status","text":"q1"}`+"\n"+`{"type":"answer","id":"q2"}`+"\n"), "q2")
	f.Add(append(append([]byte(`{"type":"answer","id":"q1","text":"`), bytes.Repeat([]byte("x"), MaxEventLine)...), "\"}\n"...), "q1")
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		if !ValidID(id) {
			return
		}
		s := testSpool(t)
		if err := os.WriteFile(s.Path("j.events"), data, FileMode); err != nil {
			t.Fatal(err)
		}
		var want *Event
		s.NewEventReader("j").Each(func(e Event) {
			if want == nil && e.Type == EventAnswer && e.ID == id {
				want = &e
			}
		})
		fh, err := os.Open(s.Path("j.events"))
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		got, lines, partial, err := findAnswer(fh, id)
		if err != nil {
			t.Fatal(err)
		}
		n, p, _ := countLinesPartial(fh)
		if lines != n || partial != p {
			t.Errorf("findAnswer counts %d lines (partial %v), countLinesPartial %d (%v)", lines, partial, n, p)
		}
		if (got == nil) != (want == nil) || got != nil && (got.Seq != want.Seq || got.Text != want.Text) {
			t.Errorf("findAnswer found %+v, the reader %+v", got, want)
		}
	})
}
