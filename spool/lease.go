package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Lease is the content of <job>.running: who holds the job. Its mtime is the
// heartbeat.
type Lease struct {
	Job     string  `json:"job"`
	Chat    string  `json:"chat,omitempty"`
	Worker  string  `json:"worker"`
	Host    string  `json:"host"`
	PID     int     `json:"pid"`
	Claimed float64 `json:"claimed"`
	Attempt int     `json:"attempt"`
	LeaseS  float64 `json:"lease_s"`
	// PIDStart is the worker's start time in clock ticks since boot
	// (/proc/PID/stat), and Boot the kernel's boot id: together with PID
	// they tell the worker from a newer process that reuses its pid.
	PIDStart uint64 `json:"pid_start,omitempty"`
	Boot     string `json:"boot,omitempty"`
	// PGID is the job's process group, once it was started.
	PGID int `json:"pgid,omitempty"`
	// First is the first attempt of the current budget of attempts: 1, or
	// the attempt that followed the last `spool requeue`.
	First int `json:"first_attempt,omitempty"`
	// Ending is the result of an end under way (End's first step): whoever
	// finds the lease with it, its worker dead, finishes that end rather
	// than judging the attempt anew.
	Ending *Result `json:"ending,omitempty"`

	// marker is what the marker held when this lease claimed it, and
	// markerTime its mtime, so that Unclaim can put it back as it was.
	marker     []byte
	markerTime time.Time
}

// Tries is how many attempts of the current budget this lease's attempt is.
func (l *Lease) Tries() int {
	first := l.First
	if first <= 0 {
		first = 1
	}
	return l.Attempt - first + 1
}

// Same reports whether two leases are the same claim.
func (l *Lease) Same(o *Lease) bool {
	return l.Job == o.Job && l.Worker == o.Worker && l.Host == o.Host && l.PID == o.PID &&
		l.Claimed == o.Claimed && l.Attempt == o.Attempt
}

// Duration returns the lease's length.
func (l *Lease) Duration() time.Duration { return time.Duration(l.LeaseS * float64(time.Second)) }

// ErrLeaseLost is returned by Heartbeat and UpdateLease when <job>.running
// is gone or holds another claim: someone took the job over, and the holder
// must stop it without writing a result.
var ErrLeaseLost = errors.New("lease lost")

// ReadLease reads <job>.running. It also returns the file's info, whose
// mtime is the heartbeat. An empty or unparsable lease is ErrCorrupt: a
// claim in progress (the marker was renamed, the lease not yet written) or
// a claimer that died in between.
func (s *Spool) ReadLease(job string) (*Lease, fs.FileInfo, error) {
	if err := CheckJobID(job); err != nil {
		return nil, nil, err
	}
	name := job + ExtRunning
	b, fi, err := readFile(s.root, name, MaxDocument)
	if err != nil {
		return nil, fi, fmt.Errorf("job %s: lease: %w", job, err)
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil || l.Worker == "" {
		return nil, fi, fmt.Errorf("job %s: lease %s: %w", job, s.Path(name), ErrCorrupt)
	}
	return &l, fi, nil
}

// Claim takes a queued job: rename(<job>.ready, <job>.running), then the
// lease is written over the claimed name. Losing the race to another
// claimer is a normal outcome: Claim returns (nil, nil, nil).
//
// prev is the lease of the attempt before, when the marker was put back by
// a recovery (a marker's content is the lease it was recovered from), so
// that the caller can make sure that attempt's processes are gone before it
// starts this one.
func (s *Spool) Claim(job string, l Lease) (lease, prev *Lease, err error) {
	if err := CheckJobID(job); err != nil {
		return nil, nil, err
	}
	if err := s.root.Rename(job+ExtReady, job+ExtRunning); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("job %s: claim: %w", job, err)
	}
	m, raw, mfi := s.readMarker(job + ExtRunning)
	l.marker = raw
	if mfi != nil {
		l.markerTime = mfi.ModTime()
	}
	l.Job = job
	l.Attempt, l.First = m.next()
	if l.Claimed == 0 {
		l.Claimed = Stamp(s.Now())
	}
	if err := s.writeLease(&l); err != nil {
		// Put the marker back so the job stays queued; if even that
		// fails, recovery finds an unreadable lease and queues it.
		if s.root.Rename(job+ExtRunning, job+ExtReady) == nil {
			s.Ring(job)
		}
		return nil, nil, fmt.Errorf("job %s: writing lease: %w", job, err)
	}
	if m.recovered() {
		p := m.Lease
		prev = &p
	}
	return &l, prev, nil
}

// writeLease writes the lease of a claim durably, its directory too.
func (s *Spool) writeLease(l *Lease) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeFile(s.root, l.Job+ExtRunning, append(b, '\n'))
}

// UpdateLease rewrites the lease (to record the job's process group, say),
// after checking that the claim is still l's.
//
// The rewrite's data is fsync'd, not its directory: after a power loss
// the lease reads back whole, as the claim wrote it or as rewritten, and
// either counts the attempt. Left to the page cache, its rename could be
// made durable by the next sync of the root (any job's submit, claim or
// result) while its data was not, and the lease read back empty: a claim
// that never finished, whose job was queued again and started once more
// than its attempts allow (TestPowerLossLeaseRewrite).
func (s *Spool) UpdateLease(l *Lease) error {
	cur, _, err := s.ReadLease(l.Job)
	if err != nil || !cur.Same(l) {
		return fmt.Errorf("job %s: %w", l.Job, ErrLeaseLost)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeSynced(s.root, l.Job+ExtRunning, append(b, '\n'))
}

// Heartbeat sets the lease's mtime to now, after checking that the claim is
// still l's. ErrLeaseLost means the job was taken over.
func (s *Spool) Heartbeat(l *Lease) error {
	cur, _, err := s.ReadLease(l.Job)
	if err != nil || !cur.Same(l) {
		return fmt.Errorf("job %s: %w", l.Job, ErrLeaseLost)
	}
	now := s.Now()
	if err := s.root.Chtimes(l.Job+ExtRunning, now, now); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("job %s: %w", l.Job, ErrLeaseLost)
		}
		return fmt.Errorf("job %s: heartbeat: %w", l.Job, err)
	}
	return nil
}

// Requeue puts a running job whose worker died back in the queue, by one
// rename: <job>.running becomes <job>.ready, still holding the dead lease
// (so that the next claimer knows the attempt and the process group to make
// sure of). Its mtime is set to notBefore first: claimers leave a marker
// alone until its mtime has passed (the backoff), and other recoverers see
// a fresh heartbeat and look away. old is the lease the caller judged dead;
// if the file holds another claim by now, Requeue does nothing and returns
// false.
func (s *Spool) Requeue(old *Lease, notBefore time.Time) (bool, error) {
	job := old.Job
	cur, _, err := s.ReadLease(job)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return false, err
		}
	} else if !cur.Same(old) {
		return false, nil
	}
	if err := s.root.Chtimes(job+ExtRunning, notBefore, notBefore); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("job %s: requeue: %w", job, err)
	}
	if err := s.root.Rename(job+ExtRunning, job+ExtReady); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("job %s: requeue: %w", job, err)
	}
	// The check above and the rename are two steps. On a shared
	// filesystem that stopped answering, a rename already asked for is
	// carried out when it answers again, maybe long after the check, when
	// the lease is a new owner's: what was moved is read back, and a lease
	// that is not old's goes back at once (docs/spoold.md, "Cut off").
	if cur != nil {
		if m := s.readMarkerContent(job + ExtReady); !m.Lease.Same(old) {
			s.root.Rename(job+ExtReady, job+ExtRunning)
			return false, syncDir(s.root)
		}
	}
	s.Ring(job)
	return true, syncDir(s.root)
}

// Unclaim puts back the marker l claimed, as it was (its content and its
// mtime), after checking that the claim is still l's: the job is queued
// again as if never claimed, no attempt spent. A daemon that finds, after
// its claim, that another host runs the job's chat gives the job back so.
func (s *Spool) Unclaim(l *Lease) (bool, error) {
	cur, _, err := s.ReadLease(l.Job)
	if err != nil || !cur.Same(l) {
		return false, err
	}
	if err := writeFile(s.root, l.Job+ExtRunning, l.marker); err != nil {
		return false, fmt.Errorf("job %s: unclaim: %w", l.Job, err)
	}
	if !l.markerTime.IsZero() {
		s.root.Chtimes(l.Job+ExtRunning, l.markerTime, l.markerTime)
	}
	if err := s.root.Rename(l.Job+ExtRunning, l.Job+ExtReady); err != nil {
		return false, fmt.Errorf("job %s: unclaim: %w", l.Job, err)
	}
	s.Ring(l.Job)
	return true, syncDir(s.root)
}
