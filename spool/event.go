package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// The event types of SPOOL.md, and the ones this project adds: worker (a
// daemon's note about the run: recovered, requeued, lease lost), cancel
// and timeout.
const (
	EventStatus   = "status"
	EventQuestion = "question"
	EventAnswer   = "answer"
	EventStart    = "start"
	EventEnd      = "end"
	EventGate     = "gate"
	EventWorker   = "worker"
)

// Limits of an events line. A longer line is not relayed: it becomes a
// status event that says how long it was.
const (
	MaxEventLine = 256 << 10
	MaxEventText = 8 << 10
)

// Event is one line of <job>.events.
type Event struct {
	Seq  int64   `json:"seq"`
	At   float64 `json:"at"`
	Type string  `json:"type"`
	Text string  `json:"text"`
	// ID names a question (type question) or the question answered (type
	// answer).
	ID      string   `json:"id,omitempty"`
	Options []string `json:"options,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Worker  string   `json:"worker,omitempty"`
	Exit    *int     `json:"exit,omitempty"`
	State   State    `json:"state,omitempty"`
}

// AppendEvent appends one event to <job>.events as one line in one
// write(2), and returns it with its seq. The seq of an event is its line
// number, so that lines appended by a shell script without a seq still
// count: the append holds the file's flock while it counts the lines, so
// that two appenders cannot take the same number.
func (s *Spool) AppendEvent(job string, ev Event) (Event, error) {
	if err := CheckJobID(job); err != nil {
		return ev, err
	}
	name := job + ExtEvents
	f, err := openAppend(s.root, name)
	if err != nil {
		return ev, fmt.Errorf("job %s: events: %w", job, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return ev, fmt.Errorf("job %s: events: lock: %w", job, err)
	}
	n, err := countLines(f)
	if err != nil {
		return ev, fmt.Errorf("job %s: events: %w", job, err)
	}
	ev.Seq = n + 1
	if ev.At == 0 {
		ev.At = Now()
	}
	if ev.Type == "" {
		ev.Type = EventStatus
	}
	ev.Text = clip(ev.Text, MaxEventText)
	b, err := json.Marshal(ev)
	if err != nil {
		return ev, err
	}
	b = append(b, '\n')
	if _, err := f.Write(b); err != nil {
		return ev, fmt.Errorf("job %s: events: %w", job, err)
	}
	return ev, nil
}

// openAppend opens (creating) an append-only file of the tree, refusing a
// symlink or anything else in its place.
func openAppend(dir *os.Root, name string) (*os.File, error) {
	// O_RDWR, not O_WRONLY: AppendEvent counts the lines before it writes.
	f, err := dir.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, FileMode)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		var lfi fs.FileInfo
		lfi, err = dir.Lstat(name)
		if err == nil && (!fi.Mode().IsRegular() || !os.SameFile(fi, lfi)) {
			err = fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kind(lfi))
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Mode().Perm() != FileMode && fi.Size() == 0 {
		f.Chmod(FileMode)
	}
	return f, nil
}

// OpenLog opens <job>.log for appending: the job's stdout and stderr.
func (s *Spool) OpenLog(job string) (*os.File, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	f, err := openAppend(s.root, job+ExtLog)
	if err != nil {
		return nil, fmt.Errorf("job %s: log: %w", job, err)
	}
	return f, nil
}

// countLines counts the newline-terminated lines of f, plus one for a last
// line without its newline (a writer that died mid-line: the next line
// still gets a number of its own).
func countLines(f *os.File) (int64, error) {
	buf := make([]byte, 64<<10)
	var n, off int64
	var last byte = '\n'
	for {
		k, err := f.ReadAt(buf, off)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
			off += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ParseEventLine reads one line of an events file (without its newline) as
// the event numbered seq. Whatever the line holds, an event comes out: a
// JSON object is decoded (its own seq is replaced by the line number),
// anything else (a shell's `echo text >> $SPOOL_EVENTS`) is a status whose
// text is the line, with invalid UTF-8 replaced.
func ParseEventLine(line []byte, seq int64) Event {
	line = bytes.TrimRight(line, "\r")
	trim := bytes.TrimSpace(line)
	var ev Event
	if len(trim) > 0 && trim[0] == '{' && json.Unmarshal(trim, &ev) == nil {
		ev.Seq = seq
		if ev.Type == "" {
			ev.Type = EventStatus
		}
		ev.Text = clip(strings.ToValidUTF8(ev.Text, "\uFFFD"), MaxEventText)
		return ev
	}
	return Event{Seq: seq, Type: EventStatus, Text: clip(strings.ToValidUTF8(string(trim), "\uFFFD"), MaxEventText)}
}

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

// Read returns the events appended since the last call. A missing file is
// no events. A line longer than MaxEventLine is returned as a status event
// that says so; a last line without its newline waits for its newline.
func (r *EventReader) Read() ([]Event, error) {
	if err := CheckJobID(r.job); err != nil {
		return nil, err
	}
	f, _, err := openRegular(r.s.root, r.job+ExtEvents, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("job %s: events: %w", r.job, err)
	}
	defer f.Close()
	var out []Event
	buf := make([]byte, 64<<10)
	for {
		k, err := f.ReadAt(buf, r.off)
		if k > 0 {
			r.off += int64(k)
			out = r.feed(buf[:k], out)
		}
		if errors.Is(err, io.EOF) || k == 0 {
			break
		}
		if err != nil {
			return out, fmt.Errorf("job %s: events: %w", r.job, err)
		}
	}
	return out, nil
}

func (r *EventReader) feed(b []byte, out []Event) []Event {
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
			return out
		}
		r.seq++
		if r.long > 0 {
			out = append(out, Event{Seq: r.seq, At: r.At(), Type: EventStatus,
				Text: fmt.Sprintf("(event line %d of %d bytes is too long to relay)", r.seq, r.long)})
			r.long = 0
		} else {
			ev := ParseEventLine(r.part, r.seq)
			if ev.At == 0 {
				ev.At = r.At()
			}
			out = append(out, ev)
			r.part = r.part[:0]
		}
		b = b[i+1:]
	}
	return out
}
