package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
)

// ErrNoJob is wrapped when no file of the job exists.
var ErrNoJob = errors.New("no such job")

// State is a job's state as the tree shows it.
type State string

// The states of a job. New is a spec whose marker has not appeared yet
// (a submit under way, or a hand submission that stopped half-way).
const (
	New       State = "new"
	Queued    State = "queued"
	Running   State = "running"
	Done      State = "done"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	// Waiting is a progress state only: a running job that asked a question.
	Waiting State = "waiting"
)

// Final reports whether st is one of the three ended states.
func (st State) Final() bool { return st == Done || st == Failed || st == Cancelled }

// Ext returns the suffix of the file that holds a job in state st, or "".
func (st State) Ext() string {
	switch st {
	case New:
		return ExtSpec
	case Queued:
		return ExtReady
	case Running:
		return ExtRunning
	case Done:
		return ExtDone
	case Failed:
		return ExtFailed
	case Cancelled:
		return ExtCancelled
	}
	return ""
}

// ParseState reads a state name as written by `spool ls --state`.
func ParseState(s string) (State, bool) {
	switch st := State(s); st {
	case New, Queued, Running, Done, Failed, Cancelled:
		return st, true
	}
	return "", false
}

// Files records which of a job's names exist in the root.
type Files uint16

// The bits of Files, one per suffix.
const (
	HasSpec Files = 1 << iota
	HasReady
	HasRunning
	HasDone
	HasFailed
	HasCancelled
	HasCancel
	HasEvents
	HasLog
)

var extBit = map[string]Files{
	ExtSpec: HasSpec, ExtReady: HasReady, ExtRunning: HasRunning, ExtDone: HasDone,
	ExtFailed: HasFailed, ExtCancelled: HasCancelled, ExtCancel: HasCancel,
	ExtEvents: HasEvents, ExtLog: HasLog,
}

// State resolves the names present to one state. A final document wins
// over a lease or a marker beside it (a crash between writing the result
// and removing the lease resolves to the result); among several final
// documents, done, then failed, then cancelled. ok is false when nothing
// but events, a log or a cancel request is left.
func (f Files) State() (State, bool) {
	switch {
	case f&HasDone != 0:
		return Done, true
	case f&HasFailed != 0:
		return Failed, true
	case f&HasCancelled != 0:
		return Cancelled, true
	case f&HasRunning != 0:
		return Running, true
	case f&HasReady != 0:
		return Queued, true
	case f&HasSpec != 0:
		return New, true
	}
	return "", false
}

// States counts the state files present: more than one is a finding for
// fsck (a job in two states at once).
func (f Files) States() int {
	n := 0
	for _, b := range []Files{HasReady, HasRunning, HasDone, HasFailed, HasCancelled} {
		if f&b != 0 {
			n++
		}
	}
	return n
}

// JobFiles returns which names of the job exist.
func (s *Spool) JobFiles(job string) (Files, error) {
	if err := CheckJobID(job); err != nil {
		return 0, err
	}
	var f Files
	for ext, bit := range extBit {
		if _, err := s.root.Lstat(job + ext); err == nil {
			f |= bit
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("job %s: %w", job, err)
		}
	}
	return f, nil
}

// State returns the job's state as the tree shows it, or an error wrapping
// ErrNoJob.
func (s *Spool) State(job string) (State, error) {
	f, err := s.JobFiles(job)
	if err != nil {
		return "", err
	}
	st, ok := f.State()
	if !ok {
		return "", fmt.Errorf("job %s: %w", job, ErrNoJob)
	}
	return st, nil
}

// Scan reads the root's names once and groups them by job. It reads no
// file and stats none, so it costs one pass over the directory whatever
// the number of jobs. Temporaries and unknown names are skipped; they are
// returned in other for fsck.
func (s *Spool) Scan() (jobs map[string]Files, other []string, err error) {
	d, err := openDir(s.root, ".")
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	jobs = make(map[string]Files)
	for {
		names, err := d.Readdirnames(4096)
		for _, n := range names {
			if job, ext, ok := SplitName(n); ok {
				jobs[job] |= extBit[ext]
			} else {
				other = append(other, n)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("spool %s: %w", s.RootPath, err)
		}
	}
	return jobs, other, nil
}

// SortedIDs returns the keys of a Scan in order: ULIDs, and most other ids
// that carry a date, sort by submit time.
func SortedIDs(jobs map[string]Files) []string {
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
