package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"time"
)

// MarkerLease returns the lease a queued job's marker carries: the
// attempt before, put back by a recovery, whose processes must be gone
// before the next attempt starts. nil when the marker carries none.
func (s *Spool) MarkerLease(job string) *Lease {
	if !ValidID(job) {
		return nil
	}
	m := s.readMarkerContent(job + ExtReady)
	if !m.recovered() {
		return nil
	}
	l := m.Lease
	return &l
}

// marker is what a <job>.ready may hold: nothing (a submission), the lease
// of a recovered attempt, or the result of a job queued again by hand.
type marker struct {
	Lease
	State string `json:"state"`
}

// next returns the attempt a claim of this marker makes, and the first
// attempt of its budget.
func (m marker) next() (attempt, first int) {
	// A result carries "state" (and may carry "worker"); a lease never
	// carries "state": test it first, or a requeued result would be taken
	// for a recovered lease and keep its spent budget.
	// An attempt number no run could reach (a hand-edited or hostile
	// marker) would wrap the count, and a budget said to start after its
	// own attempt would never be spent: neither is believed.
	switch {
	case m.Attempt <= 0 || m.Attempt >= maxAttemptNumber:
	case m.State != "": // requeued by hand: a new budget
		return m.Attempt + 1, m.Attempt + 1
	case m.Worker != "": // recovered: same budget
		first = m.First
		if first <= 0 || first > m.Attempt {
			first = 1
		}
		return m.Attempt + 1, first
	}
	return 1, 1
}

// maxAttemptNumber bounds the attempt numbers a marker may carry on.
const maxAttemptNumber = 1 << 30

// recovered reports whether the marker holds the lease of an attempt that
// was put back by a recovery.
func (m marker) recovered() bool { return m.State == "" && m.Worker != "" }

func (s *Spool) readMarkerContent(name string) marker {
	m, _, _ := s.readMarker(name)
	return m
}

// readMarker is readMarkerContent with the bytes read and their file's
// information (nil when it could not be read).
func (s *Spool) readMarker(name string) (marker, []byte, fs.FileInfo) {
	var m marker
	b, fi, err := readFile(s.root, name, MaxDocument)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		json.Unmarshal(b, &m)
	}
	return m, b, fi
}

// Marker describes a queued job's marker.
type Marker struct {
	// NotBefore is the marker's mtime: a job queued again after a failure
	// waits until then.
	NotBefore time.Time
	// Attempt is the attempt its claim will make.
	Attempt int
}

// ReadMarker reads <job>.ready.
func (s *Spool) ReadMarker(job string) (*Marker, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	fi, err := s.root.Lstat(job + ExtReady)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("job %s: marker: %w (%s)", job, ErrNotRegular, kind(fi))
	}
	m := s.readMarkerContent(job + ExtReady)
	a, _ := m.next()
	return &Marker{NotBefore: fi.ModTime(), Attempt: a}, nil
}
