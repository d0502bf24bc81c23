package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
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

// ClaimMark is the suffix of chats/<chat>/<job>.claim, the mark a daemon
// on a shared filesystem leaves before it claims a job of the chat, so
// that another host finds the chat's running jobs in the chat's directory
// rather than by listing the whole root (ChatRunning).
const ClaimMark = ".claim"

// MarkClaim leaves chats/<chat>/<job>.claim before a claim of job (the
// chat's directory must exist: LockChat makes it). The mark is empty and
// not synced: it says where to look, and the job's lease says the rest.
func (s *Spool) MarkClaim(chat, job string) error {
	if err := CheckChatID(chat); err != nil {
		return err
	}
	if err := CheckJobID(job); err != nil {
		return err
	}
	name := ChatDir(chat) + "/" + job + ClaimMark
	f, _, err := openRegular(s.root, name, os.O_WRONLY|os.O_CREATE)
	if errors.Is(err, ErrNotRegular) {
		// What stands at the mark's name (a FIFO, a symlink) is nobody's
		// document: it goes, and the mark takes its place. A directory
		// is refused by the removal.
		if err = removeName(s.root, name); err == nil {
			f, _, err = openRegular(s.root, name, os.O_WRONLY|os.O_CREATE)
		}
	}
	if err != nil {
		return chatError(chat, "claim mark", s.plain(name, false, err))
	}
	return f.Close()
}

// ChatRunning lists the leases of the chat's running jobs but except's,
// each with its heartbeat (the lease's mtime), as the claim marks of the
// chat's directory (MarkClaim) name them. A job claimed a moment ago whose
// lease is not written yet (its .running still holds the marker) is
// listed with a Lease that has only Job and Chat (Worker ""), and the time
// it was looked at: it counts as running. Other leases that do not read
// are left out: the recovery deals with them. A mark whose job is neither
// queued nor running is removed.
func (s *Spool) ChatRunning(chat, except string) ([]*Lease, []time.Time, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, nil, err
	}
	names, err := s.Names(ChatDir(chat), 0)
	if err != nil {
		return nil, nil, err
	}
	var ls []*Lease
	var beats []time.Time
	for _, n := range names {
		job, ok := strings.CutSuffix(n, ClaimMark)
		if !ok || job == except || !ValidID(job) {
			continue
		}
		l, fi, err := s.ReadLease(job)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, rerr := s.root.Lstat(job + ExtReady); errors.Is(rerr, fs.ErrNotExist) {
				removeName(s.root, ChatDir(chat)+"/"+n)
			}
			continue
		case errors.Is(err, ErrCorrupt):
			if m := s.readMarkerContent(job + ExtRunning); m.Worker == "" {
				ls = append(ls, &Lease{Job: job, Chat: chat})
				beats = append(beats, time.Now())
			}
			continue
		case err != nil || l.Chat != chat:
			continue
		}
		ls = append(ls, l)
		beats = append(beats, fi.ModTime())
	}
	return ls, beats, nil
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

// LockSpec takes an exclusive flock on <job>.json, which never changes
// while the job lives. The daemon takes it before it starts an attempt and
// hands the descriptor to the job's processes, which inherit it: as long as
// any process of the attempt lives, the lock is held, whatever became of the
// daemon. ok is false when someone holds it.
func (s *Spool) LockSpec(job string) (f *os.File, ok bool, err error) {
	f, _, err = openRegular(s.root, job+ExtSpec, os.O_RDONLY)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", job, err)
	}
	return flockNB(f)
}

// SpecLocked reports whether a process holds <job>.json's lock: some process
// of an attempt of the job still lives on this host.
func (s *Spool) SpecLocked(job string) (bool, error) {
	f, ok, err := s.LockSpec(job)
	if err != nil {
		return false, err
	}
	if ok {
		f.Close()
	}
	return !ok, nil
}

// LockChat takes the exclusive flock of chats/<chat>/lock, which the daemon
// running the chat's current job holds (and the job's processes inherit),
// so that at most one run of a chat runs at a time across processes.
func (s *Spool) LockChat(chat string) (f *os.File, ok bool, err error) {
	if err := CheckChatID(chat); err != nil {
		return nil, false, err
	}
	dir := ChatsDir + "/" + chat
	if err := s.mkdir(ChatsDir); err != nil {
		return nil, false, chatError(chat, "", s.plain(ChatsDir, true, err))
	}
	if err := s.mkdir(dir); err != nil {
		return nil, false, chatError(chat, "", s.plain(dir, true, err))
	}
	name := dir + "/" + LockFile
	f, _, err = openRegular(s.root, name, os.O_RDONLY|os.O_CREATE)
	if errors.Is(err, ErrNotRegular) {
		return nil, false, fmt.Errorf("chat %s: lock %s: %w", chat, s.Path(name), err)
	}
	if err != nil {
		return nil, false, chatError(chat, "lock", s.plain(name, false, err))
	}
	return flockNB(f)
}

func flockNB(f *os.File) (*os.File, bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, true, nil
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, false, nil
	}
	return nil, false, err
}
