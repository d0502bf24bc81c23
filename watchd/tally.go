package watchd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vmspool/vmspool/spool"
)

// Rounding is how far before its start a follower still accepts a document's
// "updated", when the document has no exact stamp ("written"): "updated"
// is rounded to 10 ms, so a document written just after the start may
// carry a stamp just before it.
const Rounding = 0.01

// Kind says what an Output is.
type Kind string

// The kinds of output. Status, Note and Answer come from events; Gap says
// events were lost to the document's window; Question is a question the
// run asks; End is the run's end, always the last output.
const (
	Status   Kind = "status"
	Note     Kind = "note" // start, gate, worker and other daemon events
	Answer   Kind = "answer"
	Question Kind = "question"
	Gap      Kind = "gap"
	End      Kind = "end"
)

// Output is one thing to tell the person.
type Output struct {
	Kind Kind
	Job  string
	// Seq is the seq of the event; for a Gap the last seq not shown, for a
	// Question without its event and for the End the document's seq.
	Seq   int64
	Event *spool.Event // the event, for Status, Note, Answer and a Question from its event
	// Text is the line a person reads.
	Text     string
	Question *spool.Question // Question only
	Skipped  int64           // Gap only
	State    spool.State     // End only: done, failed or cancelled
	Exit     *int            // End only
	Error    *string         // End only
	// FromResult is set on an End read from the job's result file, because
	// the chat's document had already moved on to another run.
	FromResult bool
}

// Guards configures a Tally. Began is the follower's start on the wall
// clock (spool.Stamp); Job, if not empty, is the one job to follow.
type Guards struct {
	Began float64
	Job   string
	// Last is the seq already relayed, for a subscriber that resumes
	// (SSE's Last-Event-ID); 0 for a fresh one.
	Last int64
	// Ended is set for a resuming subscriber that already had the end.
	Ended bool
}

// Tally is the bookkeeping of one Follower of one chat: which documents
// count (the guards), which events were already said (the seq), which
// question was shown, and whether the run ended. It does no I/O and is not
// safe for concurrent use.
type Tally struct {
	g      Guards
	job    string // the followed job: Guards.Job, or the first one accepted
	last   int64
	status string // the last status said, for documents without events
	// asked holds the question ids shown (the latest maxAsked of them,
	// oldest first in askedOrder), so that each question shows once.
	asked      map[string]bool
	askedOrder []string
	ended      bool
}

// NewTally returns a Tally with the given guards.
func NewTally(g Guards) *Tally {
	return &Tally{g: g, job: g.Job, last: g.Last, ended: g.Ended, asked: map[string]bool{}}
}

// Job returns the job being followed: the one named in the guards, or the
// one whose document was accepted first; "" while none is known.
func (t *Tally) Job() string { return t.job }

// Last returns the seq of the last event relayed.
func (t *Tally) Last() int64 { return t.last }

// Ended reports whether the run's end was given out.
func (t *Tally) Ended() bool { return t.ended }

// Accepts reports whether the guards let doc through. Without a job id it
// must be written at or after the start: by its exact stamp ("written")
// when it has one, else by "updated" less the rounding (a writer of the
// Python era). Once a job was accepted only that job's documents count: a
// document of another job is a later run of the chat, not this follower's
// (it ignores it; the Follower then looks at the followed job's result
// file). With a job id, only that job's documents count, whatever their
// stamp, so that a run that ended before its follower started is still
// reported.
//
// A run's last document is written before its result (spool.End), so a
// follower that starts after a job's result never accepts that job's
// documents without its id: the exact stamp leaves no rounding window in
// which the last document of a run that already ended could pass.
func (t *Tally) Accepts(doc *spool.Progress) bool {
	if doc == nil {
		return false
	}
	if t.job != "" {
		return doc.Job == t.job
	}
	if doc.Written > 0 {
		return doc.Written >= t.g.Began
	}
	return doc.Updated >= t.g.Began-Rounding
}

// Feed takes the chat's current document and returns what is new in it,
// in seq order, ending with the End if the run ended. A document the guards
// refuse, or any document after the end, gives nothing.
func (t *Tally) Feed(doc *spool.Progress) []Output {
	var out []Output
	t.FeedFunc(doc, func(o Output) bool { out = append(out, o); return true })
	return out
}

// FeedFunc is Feed handing each output to emit, in order, as it is made.
// When emit refuses one (returns false) FeedFunc stops there: that output
// and what follows are not taken as said, and the next call, with this
// document or a newer one, starts again from it. So a consumer that can
// take only so much at a time (a stream that writes a bounded amount per
// turn) holds no backlog: it feeds the newest document when it is ready
// again, and events that left the document meanwhile become a gap line.
// complete is false when emit refused an output.
func (t *Tally) FeedFunc(doc *spool.Progress, emit func(Output) bool) (complete bool) {
	if t.ended || !t.Accepts(doc) {
		return true
	}
	if t.job == "" {
		t.job = doc.Job
	}
	evs := doc.Events
	if !slices.IsSortedFunc(evs, func(a, b spool.Event) int { return cmpSeq(a.Seq, b.Seq) }) {
		evs = slices.Clone(evs)
		slices.SortStableFunc(evs, func(a, b spool.Event) int { return cmpSeq(a.Seq, b.Seq) })
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Seq <= t.last {
			// Said before (or before a resume): a question among them was
			// shown already.
			if ev.Type == spool.EventQuestion && ev.ID != "" {
				t.ask(ev.ID)
			}
			continue
		}
		if ev.Seq > t.last+1 {
			if !emit(gap(doc.Job, t.last, ev.Seq)) {
				return false
			}
			t.last = ev.Seq - 1
		}
		if o, ok := t.event(doc.Job, ev); ok {
			if !emit(o) {
				return false
			}
			t.said(o)
		}
		t.last = ev.Seq
	}
	switch {
	case len(evs) == 0 && doc.Status != "" && doc.Status != t.status && doc.Seq >= t.last:
		// A writer that keeps no events, only "status" (the Python
		// tools; some write no seq either): its status is the news.
		if doc.Seq > t.last+1 {
			if !emit(gap(doc.Job, t.last, doc.Seq)) {
				return false
			}
			t.last = doc.Seq - 1
		}
		if !emit(Output{Kind: Status, Job: doc.Job, Seq: doc.Seq, Text: doc.Status}) {
			return false
		}
		t.status = doc.Status
		t.last = doc.Seq
	case doc.Seq > t.last:
		// The document counts events its list no longer holds.
		if !emit(gap(doc.Job, t.last, doc.Seq+1)) {
			return false
		}
		t.last = doc.Seq
	}
	if q := doc.Question; q != nil && !doc.Done && !t.asked[q.ID] {
		if !emit(Output{Kind: Question, Job: doc.Job, Seq: doc.Seq, Question: q, Text: QuestionLine(q.Text, q.Options)}) {
			return false
		}
		t.ask(q.ID)
	}
	if doc.Done {
		if !emit(endOf(doc)) {
			return false
		}
		t.ended = true
	}
	return true
}

// maxAsked bounds the question ids a Tally remembers: a document holds
// one open question, the newest asked, so the last few ids are all that
// can come back; a run that asks without end costs no more.
const maxAsked = 2 * spool.MaxProgressEvents

// ask remembers a question id as shown.
func (t *Tally) ask(id string) {
	if t.asked[id] {
		return
	}
	if len(t.askedOrder) >= maxAsked {
		delete(t.asked, t.askedOrder[0])
		t.askedOrder = t.askedOrder[1:]
	}
	t.asked[id] = true
	t.askedOrder = append(t.askedOrder, id)
}

// said records what an output said, once it was taken.
func (t *Tally) said(o Output) {
	switch o.Kind {
	case Status:
		t.status = o.Text
	case Question:
		if o.Question != nil && o.Question.ID != "" {
			t.ask(o.Question.ID)
		}
	}
}

// event turns one event into an output, or nothing for an event whose news
// the End carries (type end) and for a question already shown. It changes
// nothing: said records the output once it is taken.
func (t *Tally) event(job string, ev *spool.Event) (Output, bool) {
	o := Output{Job: job, Seq: ev.Seq, Event: ev}
	switch ev.Type {
	case spool.EventStatus, "":
		o.Kind, o.Text = Status, ev.Text
	case spool.EventQuestion:
		if ev.ID != "" && t.asked[ev.ID] {
			return o, false
		}
		q := &spool.Question{ID: ev.ID, Text: ev.Text, Options: ev.Options, Asked: ev.At, AllowEmpty: ev.AllowEmpty}
		o.Kind, o.Question, o.Text = Question, q, QuestionLine(ev.Text, ev.Options)
	case spool.EventAnswer:
		o.Kind, o.Text = Answer, "answered: "+ev.Text
	case spool.EventEnd:
		return o, false
	case spool.EventStart:
		o.Kind, o.Text = Note, "started"+suffix(ev.Text)
	case spool.EventGate:
		o.Kind, o.Text = Note, "gate"+suffix(ev.Text)
	default:
		o.Kind, o.Text = Note, ev.Type+suffix(ev.Text)
	}
	return o, true
}

func suffix(text string) string {
	if text == "" {
		return ""
	}
	return ": " + text
}

// gap is the line for the events after last and before next that the
// document no longer holds.
func gap(job string, last, next int64) Output {
	n := next - last - 1
	word := "events"
	if n == 1 {
		word = "event"
	}
	return Output{Kind: Gap, Job: job, Seq: next - 1, Skipped: n,
		Text: fmt.Sprintf("(%d earlier %s not shown)", n, word)}
}

// QuestionLine is how a question reads as one status line.
func QuestionLine(text string, options []string) string {
	if len(options) == 0 {
		return "Question: " + text
	}
	return "Question: " + text + " [" + strings.Join(options, "/") + "]"
}

// endOf is the End of a document whose run ended. A document marked done
// without a final state (a writer of the Python era) is done if it says
// exit 0 and no error, failed otherwise.
func endOf(doc *spool.Progress) Output {
	st := doc.State
	if !st.Final() {
		st = spool.Failed
		if doc.Error == nil && (doc.Exit == nil || *doc.Exit == 0) {
			st = spool.Done
		}
	}
	return Output{Kind: End, Job: doc.Job, Seq: doc.Seq, State: st, Exit: doc.Exit, Error: doc.Error,
		Text: EndLine(st, doc.Exit, doc.Error)}
}

// EndOfResult is the End told from a job's result file.
func EndOfResult(r *spool.Result, seq int64) Output {
	o := Output{Kind: End, Job: r.Job, Seq: seq, State: r.State, Exit: r.Exit, Error: r.Error, FromResult: true}
	o.Text = EndLine(r.State, r.Exit, r.Error)
	return o
}

// EndLine is how a run's end reads: "done", "failed (exit 3): boom",
// "cancelled: by operator".
func EndLine(st spool.State, exit *int, errText *string) string {
	s := string(st)
	if exit != nil && (*exit != 0 || st != spool.Done) {
		s += fmt.Sprintf(" (exit %d)", *exit)
	}
	if errText != nil && *errText != "" {
		s += ": " + *errText
	}
	return s
}

func cmpSeq(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
