package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// An answer spoold relayed into the job's events is the answer, though
// answer.json is gone: a submission of the chat cleared it before a job on
// another host (whose ask polls a shared filesystem) saw it.
func TestWaitAnswerRelayed(t *testing.T) {
	s, err := spool.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchChat(s, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, ev := range []spool.Event{
		{Type: spool.EventQuestion, ID: "q1", Text: "go on?"},
		{Type: spool.EventAnswer, ID: "q0", Text: "an older question's"},
		{Type: spool.EventAnswer, ID: "q1", Text: "yes"},
	} {
		if _, err := s.AppendEvent(job, ev); err != nil {
			t.Fatal(err)
		}
	}
	got, relayed, err := waitAnswer(s, "c", job, "q1", w, time.After(3*time.Second))
	if err != nil || got != "yes" || !relayed {
		t.Errorf("waitAnswer = %q, %v; want the relayed answer, yes", got, err)
	}
	if _, _, err := waitAnswer(s, "c", job, "q2", w, time.After(100*time.Millisecond)); err != errNoAnswer {
		t.Errorf("an unanswered question: %v; want errNoAnswer", err)
	}
}
