package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
)

// Row is one job as `spool ls` shows it. Problem says what could not be
// read, so that one bad document costs its row a note, not the listing.
type Row struct {
	Job     string  `json:"job"`
	State   State   `json:"state"`
	Chat    string  `json:"chat,omitempty"`
	Attempt int     `json:"attempt,omitempty"`
	Created float64 `json:"created,omitempty"`
	// NotBefore is a queued job's not-before time (its marker's mtime),
	// set only while it lies in the future: a retry waiting out its backoff.
	NotBefore float64 `json:"not_before,omitempty"`
	Worker    string  `json:"worker,omitempty"`
	Exit      *int    `json:"exit,omitempty"`
	Error     *string `json:"error,omitempty"`
	Finished  float64 `json:"finished,omitempty"`
	Problem   string  `json:"problem,omitempty"`
	// Limits are the limits an ended job reached (Result.Limits).
	Limits []string `json:"limits,omitempty"`
}

// ListOptions narrows and tunes List.
type ListOptions struct {
	// State keeps only the jobs in that state ("" for all).
	State State
	// Workers is how many goroutines read documents (0: a few).
	Workers int
	// Now is the time against which NotBefore is judged (zero: now).
	Now time.Time
}

// List returns a row per job, sorted by id. It costs one readdir of the
// root, then exactly one small document per job (the result of an ended
// job, which names its chat and attempt; the lease of a running one; the
// spec, plus the marker's stat, of a queued one), read by a few goroutines
// at once. A job's submit time comes free from a ULID id; other ids cost
// the spec's stat.
//
// Most jobs of a spool have ended, so results are read while the
// directory is still being listed: a final document decides the state
// whatever else stands beside it (Files.State), so a name like <job>.done
// can be read the moment it is seen. The rare job with two final
// documents is read again once the listing is complete.
func (s *Spool) List(opt ListOptions) ([]Row, error) {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	n := opt.Workers
	if n <= 0 {
		n = min(4, 2*runtime.GOMAXPROCS(0))
	}
	// The results are read by plain system calls on the root's descriptor
	// (see readResultAt); the names are single components of the root.
	dirfd := s.dirfd()
	// The rows of final jobs are read while the names are still being
	// scanned; the rest once every name is known.
	all, byID, err := s.scanRows(dirfd, opt.State, n, now)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(all))
	var rest []int
	for _, e := range all {
		st, ok := e.files.State()
		if !ok || (opt.State != "" && st != opt.State) {
			continue
		}
		if e.read != st {
			e.row = Row{Job: e.row.Job, State: st}
			rest = append(rest, len(rows))
		}
		rows = append(rows, e.row)
	}
	inBatches(n, rest, func(i int) { s.fillRow(dirfd, &rows[i], byID[rows[i].Job].files, now) })
	return rows, nil
}

// listEntry is a job as List's scan finds it. The scanner owns its files;
// a reader owns its row, and is handed an entry at most once.
type listEntry struct {
	files Files
	sent  bool
	row   Row
	read  State // the state row was read as, or ""
}

// listBatch is how much work goes to a reader at a time: a channel
// operation per job kept the scheduler spinning (tens of thousands of
// nanosleeps).
const listBatch = 256

// scanRows scans the tree's names into entries, sorted by job, and reads
// the row of each job whose names already show it final (in state, if
// not "") on n readers while the scan goes on.
func (s *Spool) scanRows(dirfd int, state State, n int, now time.Time) ([]*listEntry, map[string]*listEntry, error) {
	early := make(chan []*listEntry, 16)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for es := range early {
				for _, e := range es {
					s.fillRow(dirfd, &e.row, HasSpec, now)
					e.read = e.row.State
				}
			}
		}()
	}
	var pending []*listEntry
	byID := make(map[string]*listEntry)
	var all []*listEntry
	err := s.scanNames(func(name, job, ext string) {
		e := byID[job]
		if e == nil {
			e = &listEntry{row: Row{Job: job}}
			byID[job] = e
			all = append(all, e)
		}
		bit, st := extInfo(ext)
		e.files |= bit
		if !e.sent && st.Final() && (state == "" || state == st) {
			e.sent = true
			e.row.State = st
			if pending = append(pending, e); len(pending) == listBatch {
				early <- pending
				pending = make([]*listEntry, 0, listBatch)
			}
		}
	})
	if len(pending) > 0 {
		early <- pending
	}
	close(early)
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(all, func(a, b *listEntry) int { return strings.Compare(a.row.Job, b.row.Job) })
	return all, byID, nil
}

// inBatches calls f for each of is on n goroutines, listBatch at a time.
func inBatches(n int, is []int, f func(int)) {
	next := make(chan []int, 16)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				for _, i := range b {
					f(i)
				}
			}
		}()
	}
	for len(is) > 0 {
		k := min(listBatch, len(is))
		next <- is[:k]
		is = is[k:]
	}
	close(next)
	wg.Wait()
}

// extInfo is extBit and the state a suffix stands for, by a switch: the
// listing asks for every name, and a map lookup was a tenth of its time.
func extInfo(ext string) (Files, State) {
	switch ext {
	case ExtSpec:
		return HasSpec, New
	case ExtReady:
		return HasReady, Queued
	case ExtRunning:
		return HasRunning, Running
	case ExtDone:
		return HasDone, Done
	case ExtFailed:
		return HasFailed, Failed
	case ExtCancelled:
		return HasCancelled, Cancelled
	case ExtCancel:
		return HasCancel, ""
	case ExtEvents:
		return HasEvents, ""
	case ExtLog:
		return HasLog, ""
	}
	return 0, ""
}

// scanNames reads the root's names once, as Scan does, and hands each
// name of a job to seen as it is read.
func (s *Spool) scanNames(seen func(name, job, ext string)) error {
	d, err := openDir(s.root, ".")
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(4096)
		for _, n := range names {
			if job, ext, ok := SplitName(n); ok {
				seen(n, job, ext)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("spool %s: %w", s.RootPath, err)
		}
	}
}

func (s *Spool) fillRow(dirfd int, r *Row, f Files, now time.Time) {
	if u, err := ulid.ParseStrict(r.Job); err == nil {
		r.Created = Stamp(ulid.Time(u.Time()))
	}
	note := func(err error) {
		if r.Problem == "" {
			r.Problem = err.Error()
		}
	}
	switch r.State {
	case Done, Failed, Cancelled:
		res := readResultAt(dirfd, r.Job+r.State.Ext())
		if res == nil {
			var err error
			if res, err = s.ReadResult(r.Job, r.State); err != nil {
				note(err)
				break
			}
		}
		r.Chat, r.Attempt, r.Worker, r.Exit, r.Error, r.Finished = res.Chat, res.Attempt, res.Worker, res.Exit, res.Error, res.Finished
		r.Limits = res.Limits
	case Running:
		l, _, err := s.ReadLease(r.Job)
		if err != nil {
			note(err)
			break
		}
		r.Chat, r.Attempt, r.Worker = l.Chat, l.Attempt, l.Worker
	case Queued, New:
		sp, err := s.ReadSpec(r.Job)
		if err != nil {
			note(err)
		} else {
			r.Chat, r.Created = sp.Chat, sp.Created
		}
		if r.State == Queued {
			m, err := s.ReadMarker(r.Job)
			if err != nil {
				note(err)
				break
			}
			r.Attempt = m.Attempt
			if m.NotBefore.After(now) {
				r.NotBefore = Stamp(m.NotBefore)
			}
		}
	}
	if r.Created == 0 && f&HasSpec != 0 {
		if fi, err := s.root.Lstat(r.Job + ExtSpec); err == nil {
			r.Created = Stamp(fi.ModTime())
		} else if !errors.Is(err, fs.ErrNotExist) {
			note(err)
		}
	}
}

// readResultAt reads the result name (one component, no "/") of the root
// open as dirfd with four system calls (openat, fstat, read, close), where
// an os.File costs five and some allocations: `spool ls` does this for
// every ended job. It refuses what ReadResult refuses (a symlink, by
// O_NOFOLLOW; anything but a plain file; an oversized document) by
// returning nil, and the caller asks ReadResult for the error.
func readResultAt(dirfd int, name string) *Result {
	fd, st, err := openRegularAt(dirfd, name, syscall.O_RDONLY)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	if st.Size > MaxDocument {
		return nil
	}
	b := make([]byte, st.Size)
	n, err := syscall.Read(fd, b)
	if err != nil || int64(n) != st.Size {
		return nil
	}
	var r Result
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}
