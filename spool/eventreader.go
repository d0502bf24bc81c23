package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// EventReader follows <job>.events from the start, returning each line
// once, as it is appended. It is not safe for concurrent use.
type EventReader struct {
	s    *Spool
	job  string
	off  int64
	seq  int64
	part []byte // a line read without its newline yet
	long int64  // bytes of an overlong line being skipped, or 0
	At   func() float64
}

// NewEventReader returns a reader of the job's events from the first line.
func (s *Spool) NewEventReader(job string) *EventReader {
	return &EventReader{s: s, job: job, At: Now}
}

// Seq returns the seq of the last complete line read.
func (r *EventReader) Seq() int64 { return r.seq }

// FastForward skips, when more than 2*keep bytes are unread, all but about
// the last keep of them: their lines are counted (so seqs stay line
// numbers) but not parsed, and how many were skipped is returned. A daemon
// ending a job that flooded its events uses it: only the latest events
// reach a progress document, and counting newlines costs a fraction of
// parsing them.
func (r *EventReader) FastForward(keep int64) (int64, error) {
	if err := CheckJobID(r.job); err != nil {
		return 0, err
	}
	f, fi, err := openRegular(r.s.root, r.job+ExtEvents, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("job %s: events: %w", r.job, err)
	}
	defer f.Close()
	end := fi.Size() - keep
	if fi.Size()-r.off <= 2*keep || end <= r.off {
		return 0, nil
	}
	buf := make([]byte, 256<<10)
	var lines int64
	lastNL := int64(-1)
	for off := r.off; off < end; {
		k, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if k > 0 {
			chunk := buf[:k]
			lines += int64(bytes.Count(chunk, []byte{'\n'}))
			if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
				lastNL = off + int64(i)
			}
			off += int64(k)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("job %s: events: %w", r.job, err)
		}
	}
	if lastNL < 0 {
		return 0, nil
	}
	// The line in progress (r.part) ended at the first newline counted.
	r.seq += lines
	r.off = lastNL + 1
	r.part, r.long = r.part[:0], 0
	return lines, nil
}

// MaxReadEvents is the most events one Read returns: the rest wait for
// the next call, so that a file of millions of empty lines costs a reader
// no more memory than a file of a few.
const MaxReadEvents = 4096

// Read returns the events appended since the last call, at most
// MaxReadEvents of them (call again while it returns that many). A missing
// file is no events. A line longer than MaxEventLine is returned as a
// status event that says so; a last line without its newline waits for its
// newline.
func (r *EventReader) Read() ([]Event, error) {
	var out []Event
	err := r.scan(func(ev Event) bool {
		out = append(out, ev)
		return len(out) < MaxReadEvents
	})
	return out, err
}

// Each calls fn with every event appended since the last call, in order,
// as it streams past: nothing is kept but the line being read (at most
// MaxEventLine), so a reader that folds events as they come (the latest
// few and a count) reads a file of any size in bounded memory.
func (r *EventReader) Each(fn func(Event)) error {
	return r.scan(func(ev Event) bool { fn(ev); return true })
}

// Tail returns the latest n (> 0) events appended since the last call,
// folded as they stream (Each): a reader that shows the last few of a
// file of any size holds no more than 2n events.
func (r *EventReader) Tail(n int) ([]Event, error) {
	var out []Event
	err := r.Each(func(ev Event) {
		out = append(out, ev)
		if len(out) >= 2*n {
			out = append(out[:0], out[len(out)-n:]...)
		}
	})
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, err
}

// EachN is Each for at most max events (max > 0): it reports whether more
// may follow, so that a caller with other duties (a daemon's loop that also
// heartbeats and times out the job) reads a flood in slices.
func (r *EventReader) EachN(max int, fn func(Event)) (more bool, err error) {
	n := 0
	err = r.scan(func(ev Event) bool {
		fn(ev)
		n++
		return n < max
	})
	return n >= max, err
}

// scan reads from where the last call stopped and hands each complete line
// to fn as an event, until the file's end or until fn returns false; the
// offset then stands just after the last line handed over.
func (r *EventReader) scan(fn func(Event) bool) error {
	if err := CheckJobID(r.job); err != nil {
		return err
	}
	f, _, err := openRegular(r.s.root, r.job+ExtEvents, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("job %s: events: %w", r.job, err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := f.ReadAt(buf, r.off)
		if k > 0 {
			used, more := r.feed(buf[:k], fn)
			r.off += int64(used)
			if !more {
				return nil
			}
		}
		if errors.Is(err, io.EOF) || k == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("job %s: events: %w", r.job, err)
		}
	}
}

// feed takes the bytes b read at the reader's offset, hands each line they
// complete to fn, and returns how many bytes it used: all of b, or up to
// the end of the line after which fn said stop (more is then false).
func (r *EventReader) feed(b []byte, fn func(Event) bool) (used int, more bool) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if r.long == 0 && len(r.part)+len(chunk) > MaxEventLine {
			r.long = int64(len(r.part))
			r.part = r.part[:0]
		}
		if r.long > 0 {
			r.long += int64(len(chunk))
		} else {
			r.part = append(r.part, chunk...)
		}
		if i < 0 {
			return used + len(b), true
		}
		r.seq++
		var ev Event
		if r.long > 0 {
			ev = Event{Seq: r.seq, At: r.At(), Type: EventStatus,
				Text: fmt.Sprintf("(event line %d of %d bytes is too long to relay)", r.seq, r.long)}
			r.long = 0
		} else {
			ev = ParseEventLine(r.part, r.seq)
			if ev.At == 0 {
				ev.At = r.At()
			}
			r.part = r.part[:0]
		}
		used += i + 1
		b = b[i+1:]
		if !fn(ev) {
			return used, false
		}
	}
	return used, true
}
