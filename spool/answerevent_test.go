package spool

import (
	"os"
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
