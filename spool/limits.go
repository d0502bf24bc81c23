package spool

import (
	"errors"
)

// Limits bounds what one job may write into the tree, so that a runaway
// job (a loop printing without end, or appending events in a tight loop)
// cannot fill the disk every chat shares. Zero fields take the daemon's
// defaults; a spec may ask for other values within the daemon's ceilings
// (docs/operations.md, "Limits").
type Limits struct {
	// Log is the most <job>.log may hold: past it, the log keeps its first
	// half and what comes after a cut, with a line that marks the cut.
	Log int64 `json:"log,omitempty"`
	// Events is the most <job>.events may hold: past it, the job is ended
	// failed with the reason, as at a timeout.
	Events int64 `json:"events,omitempty"`
	// EventRate is how many events a second are relayed to the chat's
	// progress; past it they are dropped from the progress (never from
	// the file) and one note says how many.
	EventRate int `json:"event_rate,omitempty"`
}

func (l *Limits) validate() error {
	if l == nil {
		return nil
	}
	if l.Log < 0 || l.Events < 0 || l.EventRate < 0 {
		return errors.New(`spec's "limits" must not be negative`)
	}
	return nil
}
