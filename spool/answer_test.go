package spool

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestCheckAnswer(t *testing.T) {
	yesNo := &Question{ID: "q", Options: []string{"yes", "no"}}
	free := &Question{ID: "q"}
	emptyOK := &Question{ID: "q", AllowEmpty: true}
	colours := &Question{ID: "q", Options: []string{"Red", "green"}, AllowEmpty: true}
	for _, c := range []struct {
		q    *Question
		text string
		want string
		err  error
	}{
		{yesNo, "yes", "yes", nil},
		{yesNo, "  No ", "no", nil},
		{yesNo, "YES", "yes", nil},
		{yesNo, "y", "", ErrBadAnswer},
		{yesNo, "", "", ErrBadAnswer},
		{free, "anything at all", "anything at all", nil},
		{free, "", "", ErrBadAnswer},
		{free, "  \n", "", ErrBadAnswer},
		{free, strings.Repeat("x", MaxEventText+1), "", ErrBadAnswer},
		{emptyOK, "", "", nil},
		{emptyOK, "  ", "", nil},
		{emptyOK, "some", "some", nil},
		{colours, "red", "Red", nil},
		{colours, "", "", nil},
		{colours, "blue", "", ErrBadAnswer},
	} {
		got, err := CheckAnswer(c.q, c.text)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("CheckAnswer(%+v, %q) = %q, %v; want %q, %v", c.q, c.text, got, err, c.want, c.err)
		}
	}
}

// askedIn writes a progress document for chat whose run asks q.
func askedIn(t *testing.T, s *Spool, chat, job string, q *Question) {
	t.Helper()
	p := &Progress{Job: job, Chat: chat, Seq: 1, State: Waiting, Question: q}
	if err := s.WriteProgress(p); err != nil {
		t.Fatal(err)
	}
}

func TestAnswerQuestion(t *testing.T) {
	s := testSpool(t)
	if _, err := s.AnswerQuestion("c", "", "yes"); !errors.Is(err, ErrNoQuestion) {
		t.Errorf("no run: %v", err)
	}
	askedIn(t, s, "c", "j1", &Question{ID: "q1", Text: "Go on?", Options: []string{"yes", "no"}})
	if _, err := s.AnswerQuestion("c", "q9", "yes"); !errors.Is(err, ErrNoQuestion) || !strings.Contains(err.Error(), "question q9 is not open (the open one is q1: Go on?)") {
		t.Errorf("another question named: %v", err)
	}
	if _, err := s.AnswerQuestion("c", "q1", "maybe"); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("not an option: %v", err)
	}
	if _, err := s.ReadAnswer("c"); err == nil {
		t.Error("a refused answer was written")
	}
	a, err := s.AnswerQuestion("c", "q1", "No")
	if err != nil || a.Answer != "no" || a.Job != "j1" || a.Question != "q1" {
		t.Fatalf("first answer: %+v, %v", a, err)
	}
	if _, err := s.AnswerQuestion("c", "", "yes"); !errors.Is(err, ErrAnswered) || !strings.HasSuffix(err.Error(), "question q1: already answered: no") {
		t.Errorf("a second answer to the same question: %v", err)
	}
	if got, _ := s.ReadAnswer("c"); got.Answer != "no" {
		t.Errorf("the first answer was replaced: %+v", got)
	}
	// The next question of the run is answered afresh; a stale answer of
	// another run (another job) does not count as this one's.
	askedIn(t, s, "c", "j1", &Question{ID: "q2", Text: "Name?", AllowEmpty: true})
	if a, err := s.AnswerQuestion("c", "q2", ""); err != nil || a.Answer != "" {
		t.Errorf("an empty answer where allowed: %+v, %v", a, err)
	}
	askedIn(t, s, "c", "j2", &Question{ID: "q2", Text: "Name?"})
	if _, err := s.AnswerQuestion("c", "q2", "x"); err != nil {
		t.Errorf("another run's answer to a question of the same id blocked this one: %v", err)
	}
	done := &Progress{Job: "j2", Chat: "c", Seq: 2, State: Done, Done: true, Question: &Question{ID: "q3"}}
	if err := s.WriteProgress(done); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerQuestion("c", "", "x"); !errors.Is(err, ErrNoQuestion) {
		t.Errorf("an ended run: %v", err)
	}
	if _, err := s.AnswerQuestion("../c", "", "x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("a bad chat id: %v", err)
	}
	if _, err := s.AnswerQuestion("c", "x $(y)", "x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("a bad question id: %v", err)
	}
}

// Once the run has taken the answer (its question closed in the progress
// document, while it runs and after it ended), a second answer is still
// told what won, not that nothing was asked; another run's answer, or an
// answer to another question, is not this one's.
func TestAnswerQuestionAfterTaken(t *testing.T) {
	s := testSpool(t)
	askedIn(t, s, "c", "j1", &Question{ID: "q1", Text: "Which?"})
	if _, err := s.AnswerQuestion("c", "q1", "blue\nsky"); err != nil {
		t.Fatal(err)
	}
	taken := &Progress{Job: "j1", Chat: "c", Seq: 2, State: Running}
	if err := s.WriteProgress(taken); err != nil {
		t.Fatal(err)
	}
	want := "chat c: question q1: already answered: blue sky"
	for _, qid := range []string{"q1", ""} {
		if _, err := s.AnswerQuestion("c", qid, "red"); !errors.Is(err, ErrAnswered) || err.Error() != want {
			t.Errorf("running, question %q: %v", qid, err)
		}
	}
	if _, err := s.AnswerQuestion("c", "q2", "red"); !errors.Is(err, ErrNoQuestion) || errors.Is(err, ErrAnswered) {
		t.Errorf("a question never asked: %v", err)
	}
	// The run's next question is open: q1 named is still answered.
	askedIn(t, s, "c", "j1", &Question{ID: "q2", Text: "Next?"})
	if _, err := s.AnswerQuestion("c", "q1", "red"); !errors.Is(err, ErrAnswered) || err.Error() != want {
		t.Errorf("an older question named while another is open: %v", err)
	}
	ended := &Progress{Job: "j1", Chat: "c", Seq: 3, State: Done, Done: true}
	if err := s.WriteProgress(ended); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerQuestion("c", "q1", "red"); !errors.Is(err, ErrAnswered) || err.Error() != want {
		t.Errorf("after the run ended: %v", err)
	}
	other := &Progress{Job: "j2", Chat: "c", Seq: 1, State: Running}
	if err := s.WriteProgress(other); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerQuestion("c", "q1", "red"); !errors.Is(err, ErrNoQuestion) || errors.Is(err, ErrAnswered) {
		t.Errorf("another run's answer: %v", err)
	}
	if got, _ := s.ReadAnswer("c"); got.Answer != "blue\nsky" {
		t.Errorf("the first answer was replaced: %+v", got)
	}
	// An empty answer is said as one.
	askedIn(t, s, "c", "j3", &Question{ID: "q1", Text: "Name?", AllowEmpty: true})
	if _, err := s.AnswerQuestion("c", "q1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerQuestion("c", "q1", "x"); err == nil || !strings.HasSuffix(err.Error(), "already answered: (an empty answer)") {
		t.Errorf("a second answer after an empty one: %v", err)
	}
}

// Of many answerers at once, exactly one is taken.
func TestAnswerQuestionFirstWins(t *testing.T) {
	s := testSpool(t)
	askedIn(t, s, "c", "j1", &Question{ID: "q1", Text: "Which?"})
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := []string{}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := string(rune('a' + i))
			if _, err := s.AnswerQuestion("c", "q1", text); err == nil {
				mu.Lock()
				won = append(won, text)
				mu.Unlock()
			} else if !errors.Is(err, ErrAnswered) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	a, err := s.ReadAnswer("c")
	if len(won) != 1 || err != nil || a.Answer != won[0] {
		t.Errorf("answers taken: %q; answer.json %+v, %v", won, a, err)
	}
}
