package spool

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
)

// MaxProgressEvents is how many of the latest events a progress document
// keeps.
const MaxProgressEvents = 64

// Question is a question a run asked and has not had answered.
type Question struct {
	ID      string   `json:"id"`
	Text    string   `json:"text"`
	Options []string `json:"options"`
	Asked   float64  `json:"asked"`
}

// Progress is progress/<chat>: the live state of the chat's current run,
// written by the daemon that runs it and replaced on every flush.
type Progress struct {
	Job      string    `json:"job"`
	Chat     string    `json:"chat"`
	Seq      int64     `json:"seq"`
	Updated  float64   `json:"updated"`
	Started  float64   `json:"started"`
	Done     bool      `json:"done"`
	State    State     `json:"state"`
	Status   string    `json:"status"`
	Events   []Event   `json:"events"`
	Question *Question `json:"question"`
	Exit     *int      `json:"exit"`
	Error    *string   `json:"error"`
	Attempt  int       `json:"attempt,omitempty"`
	Worker   string    `json:"worker,omitempty"`
}

// Add appends an event to the document's latest events, keeping at most
// MaxProgressEvents, and moves seq, status and question along with it.
func (p *Progress) Add(ev Event) {
	if ev.Seq <= p.Seq && p.Seq != 0 {
		return
	}
	p.Seq = ev.Seq
	p.Events = append(p.Events, ev)
	if over := len(p.Events) - MaxProgressEvents; over > 0 {
		p.Events = append(p.Events[:0:0], p.Events[over:]...)
	}
	switch ev.Type {
	case EventQuestion:
		p.Question = &Question{ID: ev.ID, Text: ev.Text, Options: ev.Options, Asked: ev.At}
		if p.Question.Options == nil {
			p.Question.Options = []string{}
		}
		if !p.Done {
			p.State = Waiting
		}
	case EventAnswer:
		if p.Question != nil && p.Question.ID == ev.ID {
			p.Question = nil
			if !p.Done {
				p.State = Running
			}
		}
	}
	if ev.Text != "" {
		p.Status = ev.Text
	}
}

// WriteProgress replaces progress/<chat> atomically, stamping "updated".
// Progress is advisory, so it is not fsync'd: it is the hot path, and the
// newest document lost in a power cut is rewritten by the next flush.
func (s *Spool) WriteProgress(p *Progress) error {
	if err := CheckChatID(p.Chat); err != nil {
		return err
	}
	p.Updated = Round2(Now())
	if p.Events == nil {
		p.Events = []Event{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	err = s.inProgressDir(func(dir *os.Root) error { return writeFile(dir, p.Chat, b, false) })
	if err != nil {
		return fmt.Errorf("chat %s: progress: %w", p.Chat, err)
	}
	return nil
}

// ReadProgress reads progress/<chat>. A symlink in its place, or anything
// but a plain file, is an error wrapping ErrNotRegular; a document that
// does not parse wraps ErrCorrupt; a missing one wraps fs.ErrNotExist.
func (s *Spool) ReadProgress(chat string) (*Progress, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, err
	}
	b, _, err := readFile(s.root, ProgressDir+"/"+chat, MaxProgress)
	if err != nil {
		return nil, fmt.Errorf("chat %s: progress: %w", chat, err)
	}
	return ParseProgress(b)
}

// ParseProgress parses a progress document.
func ParseProgress(b []byte) (*Progress, error) {
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("progress: %w: %v", ErrCorrupt, err)
	}
	if p.Chat != "" && !ValidID(p.Chat) {
		return nil, fmt.Errorf("progress: %w: invalid chat %q", ErrCorrupt, p.Chat)
	}
	return &p, nil
}

// ProgressPath returns the name of progress/<chat> in the tree.
func ProgressPath(chat string) string { return ProgressDir + "/" + chat }

var _ = fs.ErrNotExist
