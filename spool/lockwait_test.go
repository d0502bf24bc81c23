package spool

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// A job's script may open its own events file ($SPOOL_EVENTS) and flock it
// for as long as it likes, and anyone who can read chats/<chat>/ may flock
// that directory. Every writer that takes these locks waits a bounded time
// and then writes anyway: before, spoold's relay of an answer
// (AppendAnswer) waited forever, and with it the run's loop, its end, and
// the daemon's shutdown past the grace.
func TestWritersOutwaitAHeldLock(t *testing.T) {
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 50 * time.Millisecond
	s := testSpool(t)
	askedIn(t, s, "c", "j", &Question{ID: "q1", Text: "Go on?"})
	if _, err := s.AppendEvent("j", Event{Type: EventQuestion, ID: "q1", Text: "Go on?"}); err != nil {
		t.Fatal(err)
	}
	hold := func(name string, flag int) {
		t.Helper()
		f, err := os.OpenFile(s.Path(name), flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}
	hold("j"+ExtEvents, os.O_WRONLY|os.O_APPEND)
	if err := os.MkdirAll(s.Path(ChatDir("c")), 0o755); err != nil {
		t.Fatal(err)
	}
	hold(ChatDir("c"), os.O_RDONLY)
	ap := s.NewEventAppender("j")
	defer ap.Close()
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"AppendEvent", func() error { _, err := s.AppendEvent("j", Event{Text: "still here"}); return err }},
		{"EventAppender", func() error { _, err := ap.Append(Event{Text: "spoold's"}); return err }},
		{"AppendAnswer", func() error {
			_, appended, err := s.AppendAnswer("j", Event{Type: EventAnswer, ID: "q1", Text: "yes"})
			if err == nil && !appended {
				t.Error("AppendAnswer: the answer was not appended")
			}
			return err
		}},
		{"AnswerQuestion", func() error { _, err := s.AnswerQuestion("c", "q1", "yes"); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.write() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits for a lock held by another, 10 s on (the bound is %v)", tc.name, lockWait)
		}
	}
	evs, err := s.NewEventReader("j").Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[3].Type != EventAnswer {
		t.Errorf("events %+v; want the question, two statuses and the answer", evs)
	}
	if a, err := s.ReadAnswer("c"); err != nil || a.Answer != "yes" {
		t.Errorf("answer.json: %+v, %v", a, err)
	}
}
