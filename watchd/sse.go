package watchd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/vmspool/vmspool/spool"
)

// Message is the data of one server-sent event.
type Message struct {
	Job      string          `json:"job"`
	Seq      int64           `json:"seq"`
	Kind     Kind            `json:"kind"`
	Text     string          `json:"text"`
	Event    *spool.Event    `json:"event,omitempty"`
	Question *spool.Question `json:"question,omitempty"`
	Skipped  int64           `json:"skipped,omitempty"`
	State    spool.State     `json:"state,omitempty"`
	Exit     *int            `json:"exit,omitempty"`
	Error    *string         `json:"error,omitempty"`
}

// MessageOf is o as a Message.
func MessageOf(o Output) Message {
	return Message{Job: o.Job, Seq: o.Seq, Kind: o.Kind, Text: o.Text, Event: o.Event, Question: o.Question,
		Skipped: o.Skipped, State: o.State, Exit: o.Exit, Error: o.Error}
}

// EventID is the SSE id of an output: its seq, or "<seq>.end" for the end,
// so that a client that had the end can say so when it reconnects.
func EventID(o Output) string {
	if o.Kind == End {
		return strconv.FormatInt(o.Seq, 10) + ".end"
	}
	return strconv.FormatInt(o.Seq, 10)
}

// ParseEventID reads a Last-Event-ID.
func ParseEventID(id string) (last int64, ended bool, ok bool) {
	id = strings.TrimSpace(id)
	if id == "" {
		return 0, false, true
	}
	if n, found := strings.CutSuffix(id, ".end"); found {
		id, ended = n, true
	}
	last, err := strconv.ParseInt(id, 10, 64)
	if err != nil || last < 0 {
		return 0, false, false
	}
	return last, ended, true
}

// SSE writes one output as a server-sent event.
func SSE(o Output) []byte {
	b, _ := json.Marshal(MessageOf(o))
	return fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", EventID(o), o.Kind, b)
}

// encodedEvents holds the server-sent bytes of the latest events (at most
// encodedCacheSize), made once however many subscribers send them: an
// event's output is the same for every subscriber of its chat (a job's
// seq names one line of its events, never rewritten). What depends on the
// subscriber (a gap, the end, a status-only document's status) is made
// for it alone, and is small.
type encodedEvents struct {
	mu   sync.Mutex
	m    map[eventKey]*encoded
	ring []eventKey
	next int
}

const encodedCacheSize = 1024

type eventKey struct {
	job  string
	seq  int64
	kind Kind
}

type encoded struct {
	once sync.Once
	b    []byte
}

func (c *encodedEvents) get(o Output) []byte {
	if o.Event == nil || o.Kind == End || o.Kind == Gap {
		return BoundedSSE(o, MaxStreamWrite)
	}
	k := eventKey{o.Job, o.Seq, o.Kind}
	c.mu.Lock()
	e := c.m[k]
	if e == nil {
		if c.m == nil {
			c.m = make(map[eventKey]*encoded, encodedCacheSize)
			c.ring = make([]eventKey, encodedCacheSize)
		}
		if old := c.ring[c.next]; c.m[old] != nil {
			delete(c.m, old)
		}
		e = &encoded{}
		c.m[k], c.ring[c.next] = e, k
		c.next = (c.next + 1) % encodedCacheSize
	}
	c.mu.Unlock()
	// Made once: the subscribers that come for it meanwhile wait for it
	// rather than each making its own.
	e.once.Do(func() { e.b = BoundedSSE(o, MaxStreamWrite) })
	return e.b
}

// BoundedSSE is SSE(o), its texts clipped (each ending with "…") so that
// the event takes at most max bytes. The size is reckoned before encoding
// (jsonSize), so an event is encoded once, at the size it is sent.
func BoundedSSE(o Output, max int) []byte {
	for limit := spool.MaxEventText / 2; sseSize(o) > max && limit >= 16; limit /= 2 {
		o = clipOutput(o, limit)
	}
	return SSE(o)
}

// sseSize is at least the size of SSE(o): its texts as JSON writes them
// at worst (jsonSize), and a generous allowance for the rest (ids, seqs,
// field names), which are bounded.
func sseSize(o Output) int {
	n := 1024 + jsonSize(o.Text)
	if ev := o.Event; ev != nil {
		n += jsonSize(ev.Text) + jsonSize(ev.Worker) + jsonSize(ev.ID) + jsonSize(ev.Type) + jsonSize(string(ev.State))
		for _, opt := range ev.Options {
			n += 3 + jsonSize(opt)
		}
	}
	if q := o.Question; q != nil {
		n += jsonSize(q.Text) + jsonSize(q.ID)
		for _, opt := range q.Options {
			n += 3 + jsonSize(opt)
		}
	}
	if o.Error != nil {
		n += jsonSize(*o.Error)
	}
	return n + jsonSize(o.Job)
}

// jsonSize is at least the length of s as a JSON string: a byte is one,
// or six when encoding/json escapes it (control bytes, HTML's < > &,
// U+2028 and U+2029, each byte of invalid UTF-8); quotes and backslashes
// are two.
func jsonSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// clipOutput is o with every text of it cut to limit bytes (an option to
// a sixteenth of that), in copies: o and what it points to are shared.
func clipOutput(o Output, limit int) Output {
	o.Text = spool.Clip(o.Text, limit)
	if o.Event != nil {
		ev := *o.Event
		ev.Text = spool.Clip(ev.Text, limit)
		ev.Options = clipOptions(ev.Options, limit/16)
		ev.Worker = spool.Clip(ev.Worker, limit)
		o.Event = &ev
	}
	if o.Question != nil {
		q := *o.Question
		q.Text = spool.Clip(q.Text, limit)
		q.Options = clipOptions(q.Options, limit/16)
		o.Question = &q
	}
	if o.Error != nil {
		e := spool.Clip(*o.Error, limit)
		o.Error = &e
	}
	return o
}

func clipOptions(opts []string, limit int) []string {
	if opts == nil {
		return nil
	}
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = spool.Clip(o, limit)
	}
	return out
}
