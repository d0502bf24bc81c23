package watchd

import (
	"context"
	"errors"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// ErrEnded is returned by Watcher.Next once the End was given out.
var ErrEnded = errors.New("the run ended")

// Watcher follows one chat for one subscriber: the Hub's snapshots go
// through the subscriber's own Follower. When the followed job is known
// and the chat's document is gone or belongs to another job (a later run
// replaced it, or it was cleared), the Watcher looks at the job's result
// file, and if the job ended tells the rest of its events from
// <job>.events and its end from the result: a run that ended is reported,
// never waited on.
type Watcher struct {
	s   *spool.Spool
	sub *Sub
	f   *Follower
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
}

// NewWatcher subscribes to the chat on h and follows it with guards g.
func NewWatcher(s *spool.Spool, h *Hub, chat string, g Guards) (*Watcher, error) {
	if g.Job != "" {
		if err := spool.CheckJobID(g.Job); err != nil {
			return nil, err
		}
	}
	sub, err := h.Subscribe(chat)
	if err != nil {
		return nil, err
	}
	return &Watcher{s: s, sub: sub, f: NewFollower(g), CheckEvery: time.Second}, nil
}

// Follower returns the watcher's bookkeeping.
func (w *Watcher) Follower() *Follower { return w.f }

// Close ends the subscription.
func (w *Watcher) Close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.sub.Close()
}

// Next waits for something to say and returns it, in order. It returns
// (nil, nil) when wake fires (the caller's own timer: a keep-alive, a
// throttle), ctx's error when ctx is done, and ErrEnded after the End.
func (w *Watcher) Next(ctx context.Context, wake <-chan time.Time) ([]Output, error) {
	var out []Output
	_, err := w.NextFunc(ctx, wake, func(o Output) bool { out = append(out, o); return true })
	return out, err
}

// NextFunc is Next handing each output to emit as it is made (see
// Follower.FeedFunc): it returns once something was emitted, with how
// many. When emit refuses one, the rest is not held: the next call feeds
// the chat's newest state at once, from where this one stopped, so a
// consumer that takes a bounded amount per call holds no backlog, and one
// that fell behind skips to the newest (with a gap line) instead of
// queueing.
func (w *Watcher) NextFunc(ctx context.Context, wake <-chan time.Time, emit func(Output) bool) (int, error) {
	n := 0
	count := func(o Output) bool {
		if emit(o) {
			n++
			return true
		}
		return false
	}
	for {
		if w.f.Ended() {
			return 0, ErrEnded
		}
		if w.again {
			w.again = false
			if w.againResult {
				w.fromResult(count)
			} else {
				snap, _ := w.sub.Latest()
				w.feed(snap, count)
			}
			if n > 0 || w.again {
				return n, nil
			}
			continue
		}
		var check <-chan time.Time
		if w.needResult() {
			if w.timer == nil {
				w.timer = time.NewTimer(w.CheckEvery)
			}
			check = w.timer.C
		} else if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-wake:
			return 0, nil
		case <-w.sub.C:
			snap, fresh := w.sub.Latest()
			if !fresh {
				continue
			}
			w.feed(snap, count)
		case <-check:
			w.timer = nil
			w.fromResult(count)
		}
		if n > 0 || w.again {
			return n, nil
		}
	}
}

// feed feeds one snapshot, and the followed job's result when the
// snapshot is another run's document.
func (w *Watcher) feed(snap Snapshot, emit func(Output) bool) {
	w.hasDoc, w.docJob = snap.Doc != nil, ""
	if snap.Doc != nil {
		w.docJob = snap.Doc.Job
	}
	if !w.f.FeedFunc(snap.Doc, emit) {
		w.again, w.againResult = true, false
		return
	}
	if w.needResult() {
		// Another run's document, or none: ours will not be written
		// again if the job has a result, since its last document lands
		// before its result (spool.End).
		w.fromResult(emit)
	}
}

// needResult reports whether the followed job's result file is the only
// place its end can still be read: the job is known, and the chat's
// document is not its.
func (w *Watcher) needResult() bool {
	return !w.f.Ended() && w.f.Job() != "" && (!w.hasDoc || w.docJob != w.f.Job())
}

// fromResult tells the followed job's remaining events and its end if it
// has a result. It does not wait for the job's last document: that lands
// before the result, so once the result is there the chat's document,
// gone or another run's, will not become the job's again.
func (w *Watcher) fromResult(emit func(Output) bool) {
	job := w.f.Job()
	st, err := w.s.State(job)
	if err != nil || !st.Final() {
		return
	}
	r, err := w.s.ReadResult(job, st)
	if err != nil {
		return
	}
	// The latest events, as a progress document holds them, read as they
	// stream: a flood costs no memory. Seqs are line numbers: the last
	// event's is the document's.
	evs, _ := w.s.NewEventReader(job).Tail(spool.MaxProgressEvents)
	var rest []spool.Event
	var seq int64
	for _, ev := range evs {
		if ev.Seq > w.f.Last() {
			rest = append(rest, ev)
		}
		seq = max(seq, ev.Seq)
	}
	doc := &spool.Progress{Job: job, Chat: w.sub.Chat, Seq: seq, Events: rest, Done: true,
		State: r.State, Exit: r.Exit, Error: r.Error}
	complete := w.f.FeedFunc(doc, func(o Output) bool {
		if o.Kind == End {
			o.FromResult = true
		}
		return emit(o)
	})
	if !complete {
		w.again, w.againResult = true, true
	}
}
