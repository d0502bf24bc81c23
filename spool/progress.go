package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Add appends an event to the document's latest events, and moves seq,
// status and question along with it. The list keeps at least the latest
// MaxProgressEvents events and at most twice as many; Latest returns just
// the latest MaxProgressEvents.
func (p *Progress) Add(ev Event) {
	if ev.Seq <= p.Seq && p.Seq != 0 {
		return
	}
	p.Seq = ev.Seq
	// The list may grow to twice the limit before it is cut back to the
	// latest MaxProgressEvents (in place), so that a flood of events costs
	// one copy per MaxProgressEvents events, not one per event; a written
	// document holds the latest MaxProgressEvents (clip).
	if len(p.Events) >= 2*MaxProgressEvents {
		n := copy(p.Events, p.Events[len(p.Events)-MaxProgressEvents+1:])
		clear(p.Events[n:])
		p.Events = p.Events[:n]
	}
	p.Events = append(p.Events, ev)
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
	p.Updated = Round2(Stamp(s.Now()))
	if p.Events == nil {
		p.Events = []Event{}
	}
	p.clip()
	b, err := marshalLine(p)
	if err != nil {
		return err
	}
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

// Latest returns the document's latest MaxProgressEvents events (Add may
// keep more).
func (p *Progress) Latest() []Event {
	if over := len(p.Events) - MaxProgressEvents; over > 0 {
		return p.Events[over:]
	}
	return p.Events
}

// MaxStatus bounds the document's status, its question's text and its
// error, as MaxEventText bounds an event's text.
const MaxStatus = MaxEventText

// clip bounds every string and list of the document, as Event.clip does
// for an event, and keeps the latest MaxProgressEvents events.
func (p *Progress) clip() {
	p.Events = p.Latest()
	for i := range p.Events {
		p.Events[i].clip()
	}
	p.Status = clipValid(p.Status, MaxStatus)
	p.Worker = clipValid(p.Worker, MaxEventWorker)
	p.State = State(clipValid(string(p.State), MaxEventWord))
	p.Job = clipValid(p.Job, MaxEventID)
	if p.Error != nil {
		e := clipValid(*p.Error, MaxStatus)
		p.Error = &e
	}
	if q := p.Question; q != nil {
		ev := Event{ID: q.ID, Text: q.Text, Options: q.Options}
		ev.clip()
		p.Question = &Question{ID: ev.ID, Text: ev.Text, Options: ev.Options, Asked: q.Asked}
		if p.Question.Options == nil {
			p.Question.Options = []string{}
		}
	}
}

// ParseProgress parses a progress document. Whatever its size (up to
// MaxProgress), what it costs to hold is bounded: only the latest
// MaxProgressEvents events are kept, decoded one at a time as they stream
// past, and every string is clipped as a written document's would be.
func ParseProgress(b []byte) (*Progress, error) {
	type plain Progress // without the methods, so no recursion
	var p Progress
	in := struct {
		*plain
		Events eventTail `json:"events"`
	}{plain: (*plain)(&p)}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("progress: %w: %v", ErrCorrupt, err)
	}
	p.Events = in.Events
	if p.Chat != "" && !ValidID(p.Chat) {
		return nil, fmt.Errorf("progress: %w: invalid chat %q", ErrCorrupt, p.Chat)
	}
	p.clip()
	return &p, nil
}

// eventTail decodes a JSON list of events keeping only the latest
// MaxProgressEvents: a crafted document of 380,000 one-character events
// costs what 64 cost.
type eventTail []Event

func (t *eventTail) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*t = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("events: want a list")
	}
	ring := make([]Event, 0, MaxProgressEvents)
	next := 0 // where the next event goes once the ring is full
	for dec.More() {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("events: %v", err)
		}
		ev.clip()
		if len(ring) < MaxProgressEvents {
			ring = append(ring, ev)
			continue
		}
		ring[next] = ev
		next = (next + 1) % MaxProgressEvents
	}
	*t = append(ring[next:len(ring):len(ring)], ring[:next]...)
	return nil
}

// ProgressPath returns the name of progress/<chat> in the tree.
func ProgressPath(chat string) string { return ProgressDir + "/" + chat }
