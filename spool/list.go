package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
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
	// The scanner owns each entry's files; a reader owns its row, and is
	// handed an entry at most once.
	type entry struct {
		files Files
		sent  bool
		row   Row
		read  State // the state row was read as, or ""
	}
	early := make(chan *entry, 1024)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range early {
				s.fillRow(&e.row, HasSpec, now)
				e.read = e.row.State
			}
		}()
	}
	byID := make(map[string]*entry)
	var all []*entry
	err := s.scanNames(func(name, job, ext string) {
		e := byID[job]
		if e == nil {
			e = &entry{row: Row{Job: job}}
			byID[job] = e
			all = append(all, e)
		}
		e.files |= extBit[ext]
		if st := extState[ext]; !e.sent && st.Final() && (opt.State == "" || opt.State == st) {
			e.sent = true
			e.row.State = st
			early <- e
		}
	})
	close(early)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b *entry) int { return strings.Compare(a.row.Job, b.row.Job) })
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
	next := make(chan int, 256)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s.fillRow(&rows[i], byID[rows[i].Job].files, now)
			}
		}()
	}
	for _, i := range rest {
		next <- i
	}
	close(next)
	wg.Wait()
	return rows, nil
}

var extState = map[string]State{ExtDone: Done, ExtFailed: Failed, ExtCancelled: Cancelled,
	ExtRunning: Running, ExtReady: Queued, ExtSpec: New}

// scanNames reads the root's names once, as Scan does, and hands each
// name of a job to seen as it is read.
func (s *Spool) scanNames(seen func(name, job, ext string)) error {
	d, err := s.root.Open(".")
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
			return fmt.Errorf("spool %s: %w", s.Dir, err)
		}
	}
}

func (s *Spool) fillRow(r *Row, f Files, now time.Time) {
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
		res, err := s.ReadResult(r.Job, r.State)
		if err != nil {
			note(err)
			break
		}
		r.Chat, r.Attempt, r.Worker, r.Exit, r.Error, r.Finished = res.Chat, res.Attempt, res.Worker, res.Exit, res.Error, res.Finished
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
