package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"unicode/utf8"
)

// MaxProgressEvents is how many of the latest events a progress document
// keeps.
const MaxProgressEvents = 64

// MaxProgressSize bounds a written progress document once encoded: every
// string of it is clipped by its size in JSON, where a control byte takes
// six (clipJSON), and past this size the oldest events are left out. A
// job's output cannot make the document every watcher of its chat reads
// larger than this, whatever it prints.
const MaxProgressSize = 256 << 10

// Question is a question a run asked and has not had answered.
type Question struct {
	ID      string   `json:"id"`
	Text    string   `json:"text"`
	Options []string `json:"options"`
	Asked   float64  `json:"asked"`
	// AllowEmpty: an empty answer answers it (`spool ask --allow-empty`);
	// otherwise an empty answer is refused (CheckAnswer).
	AllowEmpty bool `json:"allow_empty,omitempty"`
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
	// Written is when the document was written, not rounded (Updated is
	// the same instant rounded to 10 ms): a watcher's stamp guard reads it
	// in Updated's place when it is there (invariant 7), so that a run's
	// last document, written before its result, is never accepted by a
	// watcher that started after the result, however soon after.
	Written float64 `json:"written,omitempty"`
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
		p.Question = &Question{ID: ev.ID, Text: ev.Text, Options: ev.Options, Asked: ev.At, AllowEmpty: ev.AllowEmpty}
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
	_, err := s.WriteProgressN(p)
	return err
}

// WriteProgressN is WriteProgress, and returns the size of the document it
// wrote (at most MaxProgressSize), for a writer that budgets its writes.
func (s *Spool) WriteProgressN(p *Progress) (int, error) {
	if err := CheckChatID(p.Chat); err != nil {
		return 0, err
	}
	p.Written = Stamp(s.Now())
	p.Updated = Round2(p.Written)
	if p.Events == nil {
		p.Events = []Event{}
	}
	p.clip()
	b, err := p.encode()
	if err != nil {
		return 0, err
	}
	err = s.inProgressDir(func(dirfd int) error { return writeAdvisory(dirfd, p.Chat, b) })
	if err != nil {
		return 0, fmt.Errorf("chat %s: progress: %w", p.Chat, err)
	}
	return len(b), nil
}

// encode is the clipped document as one JSON line of at most
// MaxProgressSize bytes: past it, the oldest events are left out (the
// newest is always kept, and the document's other fields are bounded well
// below the limit, so it then fits).
func (p *Progress) encode() ([]byte, error) {
	b, err := marshalLine(p)
	if err != nil || len(b) <= MaxProgressSize || len(p.Events) <= 1 {
		return b, err
	}
	over := len(b) - MaxProgressSize
	drop := 0
	for drop < len(p.Events)-1 && over > 0 {
		e, err := marshalLine(p.Events[drop])
		if err != nil {
			return nil, err
		}
		over -= len(e) // its line's newline stands for the comma between
		drop++
	}
	p.Events = p.Events[drop:]
	return marshalLine(p)
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
// for an event, and then each string by its size once encoded (clipJSON);
// it keeps the latest MaxProgressEvents events.
func (p *Progress) clip() {
	p.Events = p.Latest()
	for i := range p.Events {
		p.Events[i].clipEncoded()
	}
	p.Status = clipJSON(clipValid(p.Status, MaxStatus), MaxStatus)
	p.Worker = clipJSON(clipValid(p.Worker, MaxEventWorker), MaxEventWorker)
	p.State = State(clipJSON(clipValid(string(p.State), MaxEventWord), MaxEventWord))
	p.Job = clipJSON(clipValid(p.Job, MaxEventID), MaxEventID)
	if p.Error != nil {
		e := clipJSON(clipValid(*p.Error, MaxStatus), MaxStatus)
		p.Error = &e
	}
	if q := p.Question; q != nil {
		ev := Event{ID: q.ID, Text: q.Text, Options: q.Options}
		ev.clipEncoded()
		p.Question = &Question{ID: ev.ID, Text: ev.Text, Options: ev.Options, Asked: q.Asked, AllowEmpty: q.AllowEmpty}
		if p.Question.Options == nil {
			p.Question.Options = []string{}
		}
	}
}

// clipEncoded is Event.clip, then each string clipped by its size once
// encoded.
func (ev *Event) clipEncoded() {
	ev.clip()
	ev.Text = clipJSON(ev.Text, MaxEventText)
	ev.ID = clipJSON(ev.ID, MaxEventID)
	ev.Type = clipJSON(ev.Type, MaxEventWord)
	ev.State = State(clipJSON(string(ev.State), MaxEventWord))
	ev.Worker = clipJSON(ev.Worker, MaxEventWorker)
	copied := false // the caller's slice is not written to
	for i, o := range ev.Options {
		if c := clipJSON(o, MaxEventOption); c != o {
			if !copied {
				ev.Options, copied = append([]string(nil), ev.Options...), true
			}
			ev.Options[i] = c
		}
	}
}

// clipJSON clips valid UTF-8 s so that its JSON encoding (as marshalLine
// writes it, without its quotes) takes at most max bytes, and the "…" that
// marks a cut 3 more. A control byte is six bytes encoded (\u0001): a
// clip by raw bytes let 8 KiB of them take 48.
func clipJSON(s string, max int) string {
	n := 0
	for i, r := range s {
		n += jsonRuneSize(r)
		if n > max {
			return s[:i] + "…"
		}
	}
	return s
}

// jsonRuneSize is how many bytes encoding/json writes for r inside a
// string, HTML escaping off.
func jsonRuneSize(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return 6
	case r == utf8.RuneError:
		return 3
	}
	return utf8.RuneLen(r)
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

// inProgressDir calls fn with the descriptor of progress/ (created if
// missing), refusing a symlink in its place. The directory is kept open
// between calls and costs one lstat when nothing changed: it is reopened
// when progress/ is another inode than the one held (replaced, or a
// symlink planted), and after fn fails with it.
func (s *Spool) inProgressDir(fn func(dirfd int) error) error {
	fi, err := s.root.Lstat(ProgressDir)
	if err == nil {
		s.pmu.RLock()
		if s.prog != nil && os.SameFile(fi, s.progID) {
			err = fn(int(s.prog.Fd()))
			held := s.prog
			s.pmu.RUnlock()
			if err != nil {
				s.dropProgressDir(held)
			}
			return err
		}
		s.pmu.RUnlock()
	}
	if err := s.mkdir(ProgressDir); err != nil {
		return err
	}
	// O_DIRECTORY|O_NOFOLLOW: a symlink planted at progress/ is refused.
	dir, err := openDir(s.root, ProgressDir)
	if err != nil {
		return fmt.Errorf("%s: %w (want a directory)", s.Path(ProgressDir), err)
	}
	id, err := dir.Stat()
	if err != nil {
		dir.Close()
		return err
	}
	if err := fn(int(dir.Fd())); err != nil {
		dir.Close()
		return err
	}
	s.pmu.Lock()
	old := s.prog
	s.prog, s.progID = dir, id
	s.pmu.Unlock()
	if old != nil {
		// No reader holds it: they hold pmu for reading while they use it,
		// and it was replaced under the write lock.
		old.Close()
	}
	return nil
}

// dropProgressDir forgets the held progress/ if it is still held, so that
// the next call opens it afresh.
func (s *Spool) dropProgressDir(held *os.File) {
	s.pmu.Lock()
	if s.prog == held {
		s.prog.Close()
		s.prog, s.progID = nil, nil
	}
	s.pmu.Unlock()
}
