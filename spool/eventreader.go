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
			ev = longEvent(r.seq, r.long, r.At())
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

// longEvent is the status event that stands for line seq (0: its number
// is not known), of size bytes, too long to relay.
func longEvent(seq, size int64, at float64) Event {
	text := fmt.Sprintf("(event line %d of %d bytes is too long to relay)", seq, size)
	if seq == 0 {
		text = fmt.Sprintf("(an event line of %d bytes is too long to relay)", size)
	}
	return Event{Seq: seq, At: at, Type: EventStatus, Text: text}
}

// TailWindow is the most of an events file's end that LastEvents reads:
// four of the longest lines relayed, so that the last few events are
// whole unless they are that long.
const TailWindow = 4 * MaxEventLine

// EventTail is the end of an events file, as LastEvents reads it.
type EventTail struct {
	Events []Event
	// Older is how many lines before Events were read and left out, when
	// the whole file was read (Unread is 0).
	Older int64
	// Unread is how many bytes at the file's start came before the lines
	// read, when the file is longer than TailWindow (the window's first
	// line, which may have begun before it, counts among them). Their
	// lines are not counted: the seqs of Events (line numbers) are not
	// known, and are 0.
	Unread int64
}

// LastEvents returns the job's last n (> 0) complete events, reading at
// most the file's last TailWindow bytes whatever its size: spool show
// read a file whole to keep its last ten events, and one of 200 MB of
// empty lines cost 66 s of CPU (a line is parsed in a few hundred ns).
// Only the lines kept are parsed. A missing file is no events; a last
// line without its newline is not one yet, as for EventReader.
func (s *Spool) LastEvents(job string, n int) (*EventTail, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	f, fi, err := openRegular(s.root, job+ExtEvents, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &EventTail{}, nil
		}
		return nil, fmt.Errorf("job %s: events: %w", job, err)
	}
	defer f.Close()
	lo := max(0, fi.Size()-TailWindow)
	buf := make([]byte, fi.Size()-lo)
	k, err := f.ReadAt(buf, lo)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("job %s: events: %w", job, err)
	}
	b := buf[:k]
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	unread := lo
	if lo > 0 {
		// The window's first line began before it, or may have.
		i := bytes.IndexByte(b, '\n')
		b, unread = b[i+1:], lo+int64(i+1)
	}
	from := lastLines(b, n)
	t := &EventTail{Unread: unread}
	var seq int64
	if unread == 0 {
		seq = int64(bytes.Count(b[:from], []byte{'\n'}))
		t.Older = seq
	}
	for rest := b[from:]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if unread == 0 {
			seq++
		}
		t.Events = append(t.Events, tailEvent(rest[:i], seq))
		rest = rest[i+1:]
	}
	return t, nil
}

// lastLines returns where the last n lines of b (whole lines, b empty or
// ending with a newline) begin.
func lastLines(b []byte, n int) int {
	from := len(b)
	for i := 0; i < n && from > 0; i++ {
		from = bytes.LastIndexByte(b[:from-1], '\n') + 1
	}
	return from
}

// tailEvent is line (without its newline) as the event numbered seq, as
// EventReader reads it: a line past MaxEventLine says only its size.
func tailEvent(line []byte, seq int64) Event {
	if len(line) > MaxEventLine {
		return longEvent(seq, int64(len(line)), Now())
	}
	ev := ParseEventLine(line, seq)
	if ev.At == 0 {
		ev.At = Now()
	}
	return ev
}
