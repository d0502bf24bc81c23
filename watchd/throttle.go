package watchd

import "time"

// Throttle relays at most one status per Every, for consumers that store
// every status they get (Open WebUI writes each one into its database).
// Within a window the newest status wins and is said at the window's end;
// a Question and the End are never held back or dropped, and a status
// still held when one of them comes is dropped, being older news. It is
// driven by its caller's clock and is not safe for concurrent use.
type Throttle struct {
	Every   time.Duration
	last    time.Time // when the last output was let through
	pending *Output
}

// Offer takes one output at time now and returns what to say now.
func (t *Throttle) Offer(o Output, now time.Time) []Output {
	if t.Every <= 0 {
		return []Output{o}
	}
	if o.Kind == Question || o.Kind == End {
		t.pending = nil
		t.last = now
		return []Output{o}
	}
	if t.pending == nil && (t.last.IsZero() || now.Sub(t.last) >= t.Every) {
		t.last = now
		return []Output{o}
	}
	t.pending = &o
	return nil
}

// Due returns when Tick next has something to say, or the zero time.
func (t *Throttle) Due() time.Time {
	if t.pending == nil {
		return time.Time{}
	}
	return t.last.Add(t.Every)
}

// Tick returns the held status if its window is over.
func (t *Throttle) Tick(now time.Time) []Output {
	if t.pending == nil || now.Before(t.last.Add(t.Every)) {
		return nil
	}
	o := *t.pending
	t.pending = nil
	t.last = now
	return []Output{o}
}
