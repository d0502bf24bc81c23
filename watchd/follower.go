package watchd

import (
	"context"
	"errors"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// ErrEnded is returned by Follower.Next once the End was given out.
var ErrEnded = errors.New("the run ended")

// Follower follows one chat for one subscriber: the Hub's snapshots go
// through the subscriber's own Tally. When the followed job is known
// and the chat's document is gone or belongs to another job (a later run
// replaced it, or it was cleared), the Follower looks at the job's result
// file, and if the job ended tells the rest of its events from
// <job>.events and its end from the result: a run that ended is reported,
// never waited on.
type Follower struct {
	s     *spool.Spool
	sub   *Sub
	tally *Tally
	// What the chat's current document is: none, or a document of docJob.
	// Not the document itself: a stream blocked on a slow client must not
	// hold a document the chat has moved on from.
	hasDoc bool
	docJob string
	// again says the last feed stopped short (its consumer took no more):
	// the next call feeds again at once, the newest document (or the
	// result, if that is where it stopped), rather than waiting.
	again       bool
	againResult bool        // the result fallback stopped short
	timer       *time.Timer // the next look at the result file, while one is needed
	// CheckEvery is how often the result file is looked at while needed.
	CheckEvery time.Duration
	// held is the followed run's last document (done) while its result is
	// not there yet: its events are told, its End waits for the result
	// (at most endHold from heldSince), so that whoever reads the job's
	// state after the End reads it ended (spool.End writes the last
	// document first, then the result).
	held      *spool.Progress
	heldSince time.Time
	holdTimer *time.Timer
}

// endHold bounds how long a run's End waits for its result: a daemon that
// died between the two leaves the result to a recovery, and the person is
// told the end the document says rather than nothing.
const endHold = 5 * time.Second

// holdEvery is how often the result is looked for while an End is held:
// it follows the last document within milliseconds.
const holdEvery = 10 * time.Millisecond

// NewFollower subscribes to the chat on h and follows it with guards g.
func NewFollower(s *spool.Spool, h *Hub, chat string, g Guards) (*Follower, error) {
	if g.Job != "" {
		if err := spool.CheckJobID(g.Job); err != nil {
			return nil, err
		}
	}
	sub, err := h.Subscribe(chat)
	if err != nil {
		return nil, err
	}
	return &Follower{s: s, sub: sub, tally: NewTally(g), CheckEvery: time.Second}, nil
}

// Tally returns the follower's bookkeeping.
func (f *Follower) Tally() *Tally { return f.tally }

// Close ends the subscription.
func (f *Follower) Close() {
	if f.timer != nil {
		f.timer.Stop()
	}
	if f.holdTimer != nil {
		f.holdTimer.Stop()
	}
	f.sub.Close()
}

// Next waits for something to say and returns it, in order. It returns
// (nil, nil) when wake fires (the caller's own timer: a keep-alive, a
// throttle), ctx's error when ctx is done, and ErrEnded after the End.
func (f *Follower) Next(ctx context.Context, wake <-chan time.Time) ([]Output, error) {
	var out []Output
	_, err := f.NextFunc(ctx, wake, func(o Output) bool { out = append(out, o); return true })
	return out, err
}

// NextFunc is Next handing each output to emit as it is made (see
// Tally.FeedFunc): it returns once something was emitted, with how
// many. When emit refuses one, the rest is not held: the next call feeds
// the chat's newest state at once, from where this one stopped, so a
// consumer that takes a bounded amount per call holds no backlog, and one
// that fell behind skips to the newest (with a gap line) instead of
// queueing.
func (f *Follower) NextFunc(ctx context.Context, wake <-chan time.Time, emit func(Output) bool) (int, error) {
	n := 0
	count := func(o Output) bool {
		if emit(o) {
			n++
			return true
		}
		return false
	}
	for {
		if f.tally.Ended() {
			return 0, ErrEnded
		}
		if f.again {
			f.again = false
			if f.againResult {
				f.fromResult(count)
			} else {
				snap, _ := f.sub.Latest()
				f.feed(snap, count)
			}
			if n > 0 || f.again {
				return n, nil
			}
			continue
		}
		var check <-chan time.Time
		if f.needResult() {
			if f.timer == nil {
				f.timer = time.NewTimer(f.CheckEvery)
			}
			check = f.timer.C
		} else if f.timer != nil {
			f.timer.Stop()
			f.timer = nil
		}
		var hold <-chan time.Time
		if f.held != nil {
			if f.holdTimer == nil {
				f.holdTimer = time.NewTimer(holdEvery)
			}
			hold = f.holdTimer.C
		} else if f.holdTimer != nil {
			f.holdTimer.Stop()
			f.holdTimer = nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-wake:
			return 0, nil
		case <-f.sub.C:
			snap, fresh := f.sub.Latest()
			if !fresh {
				continue
			}
			f.feed(snap, count)
		case <-check:
			f.timer = nil
			f.fromResult(count)
		case <-hold:
			f.holdTimer = nil
			f.feed(Snapshot{Doc: f.held}, count)
		}
		if n > 0 || f.again {
			return n, nil
		}
	}
}

// feed feeds one snapshot, and the followed job's result when the
// snapshot is another run's document.
func (f *Follower) feed(snap Snapshot, emit func(Output) bool) {
	f.hasDoc, f.docJob = snap.Doc != nil, ""
	if snap.Doc != nil {
		f.docJob = snap.Doc.Job
	}
	doc := f.holdEnd(snap.Doc)
	if !f.tally.FeedFunc(doc, emit) {
		f.again, f.againResult = true, false
		return
	}
	if f.needResult() {
		// Another run's document, or none: ours will not be written
		// again if the job has a result, since its last document lands
		// before its result (spool.End).
		f.fromResult(emit)
	}
}

// holdEnd returns doc as the tally should take it now: the followed
// run's last document without its end while the job has no result yet
// (its events are news at once; the End comes with the result, or after
// endHold), else doc itself. A document of another run, or of a writer
// that names no job, is not held.
func (f *Follower) holdEnd(doc *spool.Progress) *spool.Progress {
	if doc == nil || !doc.Done || doc.Job == "" || f.tally.Ended() || !f.tally.Accepts(doc) {
		f.held = nil
		return doc
	}
	if f.held == nil {
		f.heldSince = time.Now()
	}
	if st, err := f.s.State(doc.Job); (err == nil && st.Final()) || time.Since(f.heldSince) >= endHold {
		f.held = nil
		return doc
	}
	f.held = doc
	open := *doc
	open.Done, open.Question = false, nil
	return &open
}

// needResult reports whether the followed job's result file is the only
// place its end can still be read: the job is known, and the chat's
// document is not its.
func (f *Follower) needResult() bool {
	return !f.tally.Ended() && f.tally.Job() != "" && (!f.hasDoc || f.docJob != f.tally.Job())
}

// fromResult tells the followed job's remaining events and its end if it
// has a result. It does not wait for the job's last document: that lands
// before the result, so once the result is there the chat's document,
// gone or another run's, will not become the job's again.
func (f *Follower) fromResult(emit func(Output) bool) {
	job := f.tally.Job()
	st, err := f.s.State(job)
	if err != nil || !st.Final() {
		return
	}
	r, err := f.s.ReadResult(job, st)
	if err != nil {
		return
	}
	// The latest events, as a progress document holds them, read as they
	// stream: a flood costs no memory. Seqs are line numbers: the last
	// event's is the document's.
	evs, _ := f.s.NewEventReader(job).Tail(spool.MaxProgressEvents)
	var rest []spool.Event
	var seq int64
	for _, ev := range evs {
		if ev.Seq > f.tally.Last() {
			rest = append(rest, ev)
		}
		seq = max(seq, ev.Seq)
	}
	doc := &spool.Progress{Job: job, Chat: f.sub.Chat, Seq: seq, Events: rest, Done: true,
		State: r.State, Exit: r.Exit, Error: r.Error}
	complete := f.tally.FeedFunc(doc, func(o Output) bool {
		if o.Kind == End {
			o.FromResult = true
		}
		return emit(o)
	})
	if !complete {
		f.again, f.againResult = true, true
	}
}
