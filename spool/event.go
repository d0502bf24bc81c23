package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The event types of docs/contract.md, and the ones this project adds: worker (a
// daemon's note about the run: recovered, requeued, lease lost), cancel
// and timeout.
const (
	EventStatus   = "status"
	EventQuestion = "question"
	EventAnswer   = "answer"
	EventStart    = "start"
	EventEnd      = "end"
	EventGate     = "gate"
	EventWorker   = "worker"
)

// Limits of an events line. A longer line is not relayed: it becomes a
// status event that says how long it was.
const (
	MaxEventLine = 256 << 10
	MaxEventText = 8 << 10
)

// Limits of an event's other fields. Every string and list of an event is
// clipped to these wherever an event is written or read, so that no field
// of one line (a question id of 250,000 characters, say) can grow a
// progress document past what its readers accept: 64 events are at most a
// few hundred KiB, whatever the job wrote.
const (
	MaxEventID      = 256 // a job's id in a document (a question's id is an id: ValidID)
	MaxEventWord    = 64  // type and state
	MaxEventWorker  = 256
	MaxEventOptions = 16 // a question's options
	MaxEventOption  = 256
)

// Event is one line of <job>.events.
type Event struct {
	Seq  int64   `json:"seq"`
	At   float64 `json:"at"`
	Type string  `json:"type"`
	Text string  `json:"text"`
	// ID names a question (type question) or the question answered (type
	// answer).
	ID      string   `json:"id,omitempty"`
	Options []string `json:"options,omitempty"`
	// AllowEmpty marks a question an empty answer answers.
	AllowEmpty bool   `json:"allow_empty,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Worker     string `json:"worker,omitempty"`
	Exit       *int   `json:"exit,omitempty"`
	State      State  `json:"state,omitempty"`
}

// CheckQuestionID returns a one-line error naming a question id that is
// not an id (ValidID), or nil. A question id is shown to people inside
// the command that answers it (`spool answer --question Q`), so it obeys
// the id rule: nothing in it can be read by a shell as anything but a word.
func CheckQuestionID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("question %q: %w", clip(id, 80), ErrInvalidID)
	}
	return nil
}

// eventLine fills in what an appended event needs (its seq, time, type;
// the text clipped) and encodes it as one line. A question or an answer
// whose id is not an id is refused.
func eventLine(ev Event, seq int64) ([]byte, Event, error) {
	if (ev.Type == EventQuestion || ev.Type == EventAnswer) && ev.ID != "" {
		if err := CheckQuestionID(ev.ID); err != nil {
			return nil, ev, err
		}
	}
	ev.Seq = seq
	if ev.At == 0 {
		ev.At = Now()
	}
	if ev.Type == "" {
		ev.Type = EventStatus
	}
	ev.clip()
	b, err := marshalLine(ev)
	if err != nil {
		return nil, ev, err
	}
	return b, ev, nil
}

// clip bounds every string and list of the event (MaxEventText and the
// limits beside it), making each valid UTF-8. An id that is not an id
// (ValidID) is dropped, and a question or an answer carrying one, which
// a job can append by hand, is read as a status that says it was refused:
// it asks nothing, so no hint to answer it is ever shown.
func (ev *Event) clip() {
	if ev.ID != "" && !ValidID(ev.ID) {
		ev.ID = ""
		if ev.Type == EventQuestion || ev.Type == EventAnswer {
			what := "an answer"
			if ev.Type == EventQuestion {
				what = "a question"
			}
			ev.Text = "(not relayed as " + what + ": its id is an " + ErrInvalidID.Error() + ") " + ev.Text
			ev.Type, ev.Options = EventStatus, nil
		}
	}
	ev.Text = clipValid(ev.Text, MaxEventText)
	ev.Type = clipValid(ev.Type, MaxEventWord)
	ev.State = State(clipValid(string(ev.State), MaxEventWord))
	ev.Worker = clipValid(ev.Worker, MaxEventWorker)
	if len(ev.Options) > MaxEventOptions {
		ev.Options = ev.Options[:MaxEventOptions:MaxEventOptions]
	}
	copied := false // the caller's slice is not written to
	for i, o := range ev.Options {
		if len(o) > MaxEventOption || !utf8.ValidString(o) {
			if !copied {
				ev.Options, copied = append([]string(nil), ev.Options...), true
			}
			ev.Options[i] = clipValid(o, MaxEventOption)
		}
	}
}

func clipValid(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return clip(s, max)
}

// marshalLine encodes v as one JSON line without HTML escaping: a job's
// "<" is one byte in the tree, not the six of "\u003c".
func marshalLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Clip cuts s to at most max bytes at a rune boundary, marking the cut
// with "…", as every field of an event is clipped.
func Clip(s string, max int) string { return clip(s, max) }

func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ParseEventLine reads one line of an events file (without its newline) as
// the event numbered seq. Whatever the line holds, an event comes out: a
// JSON object is decoded (its own seq is replaced by the line number),
// anything else (a shell's `echo text >> $SPOOL_EVENTS`) is a status whose
// text is the line, with invalid UTF-8 replaced.
func ParseEventLine(line []byte, seq int64) Event {
	line = bytes.TrimRight(line, "\r")
	trim := bytes.TrimSpace(line)
	var ev Event
	if len(trim) > 0 && trim[0] == '{' && json.Unmarshal(trim, &ev) == nil {
		ev.Seq = seq
		if ev.Type == "" {
			ev.Type = EventStatus
		}
		ev.clip()
		return ev
	}
	return Event{Seq: seq, Type: EventStatus, Text: clipValid(string(trim), MaxEventText)}
}
