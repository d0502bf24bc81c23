package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Names inside chats/<chat>/.
const (
	AnswerFile = "answer.json"
	// LockFile is flocked by the daemon that runs the chat's current job;
	// it is never read and holds nothing.
	LockFile = "lock"
)

// Answer is chats/<chat>/answer.json: the person's answer to a question.
// It is taken only by the run that asked that question id.
type Answer struct {
	Job      string  `json:"job"`
	Question string  `json:"question"`
	Answer   string  `json:"answer"`
	At       float64 `json:"at"`
}

// WriteAnswer writes chats/<chat>/answer.json atomically and durably (a
// person's answer must not vanish in a crash).
func (s *Spool) WriteAnswer(chat string, a *Answer) error {
	if err := CheckChatID(chat); err != nil {
		return err
	}
	if a.At == 0 {
		a.At = Now()
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := s.mkdir(ChatsDir); err != nil {
		return chatError(chat, "", s.plain(ChatsDir, true, err))
	}
	dir, err := s.subRoot(ChatsDir+"/"+chat, true)
	if err != nil {
		return chatError(chat, "answer", s.plain(ChatsDir+"/"+chat, true, err))
	}
	defer dir.Close()
	if err := writeFile(dir, AnswerFile, append(b, '\n')); err != nil {
		return fmt.Errorf("chat %s: answer: %w", chat, err)
	}
	return nil
}

// ReadAnswer reads chats/<chat>/answer.json.
func (s *Spool) ReadAnswer(chat string) (*Answer, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, err
	}
	name := ChatsDir + "/" + chat + "/" + AnswerFile
	b, _, err := readFile(s.root, name, MaxDocument)
	if err != nil {
		return nil, chatError(chat, "answer", s.plain(name, false, err))
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("chat %s: answer %s: %w: %v", chat, s.Path(name), ErrCorrupt, err)
	}
	return &a, nil
}

// ChatDir returns the name of chats/<chat> in the tree.
func ChatDir(chat string) string { return ChatsDir + "/" + chat }

// Why an answer is not taken (AnswerQuestion). Each is wrapped with the
// chat and the question, in one line a person can act on.
var (
	// ErrNoQuestion: the chat's run asks nothing now (no run, a run that
	// ended, or another question than the one named is open).
	ErrNoQuestion = errors.New("no question is open")
	// ErrAnswered: the open question has an answer already; the first
	// answer wins, from wherever it came.
	ErrAnswered = errors.New("already answered")
	// ErrBadAnswer: the text does not answer the question (not one of its
	// options, empty where the question needs a word, too long).
	ErrBadAnswer = errors.New("not an answer to the question")
)

// CheckAnswer returns the answer text that q takes for text, or an error
// wrapping ErrBadAnswer: the one rule every answerer applies (`spool
// answer`, watchd's page, the Open WebUI tools through them).
//
//   - An answer to a question with options is one of them: as written, or
//     the option it names whatever its case and surrounding spaces ("Yes"
//     answers "yes"), given back as the option is written.
//   - An empty answer (nothing but spaces) is taken only by a question
//     that allows it (AllowEmpty, `spool ask --allow-empty`), and is then
//     the empty string.
//   - An answer is at most MaxEventText bytes: it is relayed as an event.
func CheckAnswer(q *Question, text string) (string, error) {
	if strings.TrimSpace(text) == "" {
		if q.AllowEmpty {
			return "", nil
		}
		return "", fmt.Errorf("%w: an empty answer is not taken (this question needs one)", ErrBadAnswer)
	}
	if len(text) > MaxEventText {
		return "", fmt.Errorf("%w: the answer is %d bytes, more than the %d an answer may be", ErrBadAnswer, len(text), MaxEventText)
	}
	if len(q.Options) == 0 {
		return text, nil
	}
	for _, o := range q.Options {
		if o == text {
			return o, nil
		}
	}
	for _, o := range q.Options {
		if strings.EqualFold(strings.TrimSpace(o), strings.TrimSpace(text)) {
			return o, nil
		}
	}
	return "", fmt.Errorf("%w: %q is not one of its options (%s)", ErrBadAnswer, clip(text, 80), strings.Join(q.Options, ", "))
}

// AnswerQuestion answers the open question of the chat's run, as `spool
// answer` and watchd's page do: progress/<chat> says which question is
// open; qid, when given, must name it (a person answers what they read);
// the text must answer it (CheckAnswer); and the first answer wins: an
// answer.json that answers this question of this run already is kept, and
// this one refused (ErrAnswered, "already answered: TEXT", before the
// text is judged: the loser of a race is told what won), while the
// question is open, once the run took the answer and closed it, and after
// the run ended (answeredBefore). It returns the answer written.
//
// Two answerers on one host are kept apart by a lock on the chat's
// directory, held from the read of answer.json to the write of the new
// one. Across hosts of a shared filesystem whose locks do not reach the
// others (flock on sshfs), two answers in the same instant may both be
// written and the later one kept; what the run takes is still one answer,
// the one spoold relays into its events.
func (s *Spool) AnswerQuestion(chat, qid, text string) (*Answer, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, err
	}
	if qid != "" {
		if err := CheckQuestionID(qid); err != nil {
			return nil, err
		}
	}
	p, err := s.ReadProgress(chat)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("chat %s: %w (no run in progress)", chat, ErrNoQuestion)
	}
	if err != nil {
		return nil, err
	}
	q := p.Question
	switch {
	case q == nil || p.Done:
		if err := s.answeredBefore(chat, qid, p); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("chat %s: %w (job %s is %s)", chat, ErrNoQuestion, p.Job, p.State)
	case qid != "" && q.ID != qid:
		if err := s.answeredBefore(chat, qid, p); err != nil {
			return nil, err
		}
		return nil, &answerError{fmt.Sprintf("chat %s: question %s is not open (the open one is %s: %s)", chat, qid, q.ID, flat(q.Text)), ErrNoQuestion}
	}
	if err := s.mkdir(ChatsDir); err != nil {
		return nil, chatError(chat, "", s.plain(ChatsDir, true, err))
	}
	dir, err := s.subRoot(ChatDir(chat), true)
	if err != nil {
		return nil, chatError(chat, "answer", s.plain(ChatDir(chat), true, err))
	}
	defer dir.Close()
	unlock := lockDir(dir)
	defer unlock()
	b, _, err := readFile(dir, AnswerFile, MaxDocument)
	if err == nil {
		var prev Answer
		if json.Unmarshal(b, &prev) == nil && prev.Question == q.ID && (prev.Job == "" || prev.Job == p.Job) {
			return nil, answeredError(chat, &prev)
		}
	}
	// Checked after the answer already taken: the loser of a race is told
	// what won, whatever it sent.
	text, err = CheckAnswer(q, text)
	if err != nil {
		return nil, fmt.Errorf("chat %s: question %s: %w", chat, q.ID, err)
	}
	a := &Answer{Job: p.Job, Question: q.ID, Answer: text, At: Now()}
	b, err = json.Marshal(a)
	if err != nil {
		return nil, err
	}
	if err := writeFile(dir, AnswerFile, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("chat %s: answer: %w", chat, err)
	}
	return a, nil
}

// answeredBefore returns ErrAnswered when no question is open to take an
// answer (or not the one named) because the run took one already: the
// run's answer event closes its question in progress/<chat> 10 to 50 ms
// after the first answer is written, and a second answerer who comes then
// (the loser of a race between the shell, the page and the dialog) must
// be told what won, not that nothing was asked. chats/<chat>/answer.json
// keeps the answer until the chat's next run is submitted, so this holds
// while the run lives and after it ended. The answer counts when it is of
// this run (its job) and of the question meant: qid when named, else the
// question the document still shows (a run that ended while asking), else
// the run's last answered question. Anything else is nil: no question is
// open, and the caller says so.
func (s *Spool) answeredBefore(chat, qid string, p *Progress) error {
	prev, err := s.ReadAnswer(chat)
	if err != nil || p.Job == "" || prev.Job != p.Job {
		return nil
	}
	meant := qid
	if meant == "" && p.Question != nil {
		meant = p.Question.ID
	}
	if meant != "" && prev.Question != meant {
		return nil
	}
	return answeredError(chat, prev)
}

// answeredError is ErrAnswered for the answer a: "chat C: question Q:
// already answered: TEXT", the text on one line and cut past 200 bytes,
// last, so that nothing after it is taken for part of it.
func answeredError(chat string, a *Answer) error {
	text := clip(flat(a.Answer), 200)
	if text == "" {
		text = "(an empty answer)"
	}
	return &answerError{fmt.Sprintf("chat %s: question %s: %v: %s", chat, a.Question, ErrAnswered, text), ErrAnswered}
}

// answerError is a refusal whose message says it all, and which still
// is one of the Err* above for errors.Is.
type answerError struct {
	msg  string
	kind error
}

func (e *answerError) Error() string { return e.msg }
func (e *answerError) Unwrap() error { return e.kind }

// flat is s with its runs of white space, newlines included, made one
// space, for a message of one line.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }
