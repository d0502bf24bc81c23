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
	"sync"
	"syscall"
	"unicode/utf8"
)

// The event types of docs/contract.md, and the ones this project adds: worker (a
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

// Limits of an event's other fields. Every string and list of an event is
// clipped to these wherever an event is written or read, so that no field
// of one line (a question id of 250,000 characters, say) can grow a
// progress document past what its readers accept: 64 events are at most a
// few hundred KiB, whatever the job wrote.
const (
	MaxEventID      = 256 // a job's id in a document (a question's id is an id: ValidID)
	MaxEventWord    = 64  // type and state
	MaxEventWorker  = 256
	MaxEventOptions = 16 // a question's options
	MaxEventOption  = 256
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
	// AllowEmpty marks a question an empty answer answers.
	AllowEmpty bool   `json:"allow_empty,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Worker     string `json:"worker,omitempty"`
	Exit       *int   `json:"exit,omitempty"`
	State      State  `json:"state,omitempty"`
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
	n, partial, err := countLinesPartial(f)
	if err != nil {
		return ev, fmt.Errorf("job %s: events: %w", job, err)
	}
	b, ev, err := eventLine(ev, n+1)
	if err != nil {
		return ev, err
	}
	if partial {
		b = endPartial(b)
	}
	if _, err := f.Write(b); err != nil {
		return ev, fmt.Errorf("job %s: events: %w", job, err)
	}
	return ev, nil
}

// EventAppender appends events to one job's events file for a writer that
// appends many times (spoold, for the run it owns). It keeps the file open,
// and the number of lines the file held after its last append, so that an
// append after nobody else appended reads nothing of the file: it costs an
// lstat (the name must still be the file held, else it is opened again,
// refusing a symlink as AppendEvent does), the flock, an fstat, the write
// and an lseek. Lines appended by others since are counted from where its
// last append ended. The seq is the line number, taken under the file's
// flock as AppendEvent takes it, so that a concurrent `spool say` cannot
// take the same seq. It is safe for concurrent use; Close releases the
// file.
type EventAppender struct {
	s   *Spool
	job string

	mu    sync.Mutex
	f     *os.File
	id    fs.FileInfo // what f is
	end   int64       // where the last append ended, or -1: unknown
	lines int64       // the lines of the file up to end
}

// NewEventAppender returns an appender of the job's events. Nothing is
// opened until the first Append.
func (s *Spool) NewEventAppender(job string) *EventAppender {
	return &EventAppender{s: s, job: job, end: -1}
}

// Append appends one event as one line in one write(2), and returns it
// with its seq, as AppendEvent does.
func (a *EventAppender) Append(ev Event) (Event, error) {
	if err := CheckJobID(a.job); err != nil {
		return ev, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	name := a.job + ExtEvents
	if a.f != nil {
		if lfi, err := a.s.root.Lstat(name); err != nil || !os.SameFile(lfi, a.id) {
			a.closeLocked()
		}
	}
	if a.f == nil {
		f, err := openAppend(a.s.root, name)
		if err != nil {
			return ev, fmt.Errorf("job %s: events: %w", a.job, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return ev, fmt.Errorf("job %s: events: %w", a.job, err)
		}
		a.f, a.id, a.end = f, fi, -1
	}
	fd := int(a.f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		return ev, fmt.Errorf("job %s: events: lock: %w", a.job, err)
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	n, partial, size, err := a.count()
	if err != nil {
		a.end = -1
		return ev, fmt.Errorf("job %s: events: %w", a.job, err)
	}
	b, ev, err := eventLine(ev, n+1)
	if err != nil {
		return ev, err
	}
	if partial {
		b = endPartial(b)
	}
	if _, err := a.f.Write(b); err != nil {
		a.end = -1
		return ev, fmt.Errorf("job %s: events: %w", a.job, err)
	}
	// With O_APPEND the offset is now the end of this line: if it is
	// where the line was meant to go, the count holds up to there (a
	// shell's unlocked append that came in between would show here).
	a.end = -1
	if off, err := a.f.Seek(0, io.SeekCurrent); err == nil && off == size+int64(len(b)) {
		a.end, a.lines = off, n+1
	}
	return ev, nil
}

// count returns the lines of the held file as countLines counts them,
// whether the last one lacks its newline, and the file's size. It reads
// only what was appended after the last append of a, whose last byte must
// still be the newline a wrote (else the whole file is counted).
func (a *EventAppender) count() (lines int64, partial bool, size int64, err error) {
	fi, err := a.f.Stat()
	if err != nil {
		return 0, false, 0, err
	}
	size = fi.Size()
	switch {
	case a.end > 0 && size == a.end:
		return a.lines, false, size, nil
	case a.end > 0 && size > a.end:
		n, partial, ok, err := countFrom(a.f, a.end-1)
		if err == nil && ok {
			return a.lines + n, partial, size, nil
		}
	}
	n, partial, err := countLinesPartial(a.f)
	return n, partial, size, err
}

// countFrom counts the lines of f after off, where f must hold a newline
// (ok reports whether it does); a last line without its newline counts,
// and is reported, as in countLinesPartial.
func countFrom(f *os.File, off int64) (n int64, partial, ok bool, err error) {
	buf := make([]byte, 64<<10)
	first := true
	var last byte = '\n'
	for {
		k, err := f.ReadAt(buf, off)
		if k > 0 {
			b := buf[:k]
			if first {
				if b[0] != '\n' {
					return 0, false, false, nil
				}
				b, first = b[1:], false
			}
			n += int64(bytes.Count(b, []byte{'\n'}))
			last = buf[k-1]
			off += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, false, false, err
		}
	}
	if first {
		return 0, false, false, nil
	}
	if last != '\n' {
		n++
	}
	return n, last != '\n', true, nil
}

// Close releases the events file.
func (a *EventAppender) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked()
}

func (a *EventAppender) closeLocked() error {
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f, a.id, a.end = nil, nil, -1
	return err
}

// CheckQuestionID returns a one-line error naming a question id that is
// not an id (ValidID), or nil. A question id is shown to people inside
// the command that answers it (`spool answer --question Q`), so it obeys
// the id rule: nothing in it can be read by a shell as anything but a word.
func CheckQuestionID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("question %q: %w", clip(id, 80), ErrInvalidID)
	}
	return nil
}

// eventLine fills in what an appended event needs (its seq, time, type;
// the text clipped) and encodes it as one line. A question or an answer
// whose id is not an id is refused.
func eventLine(ev Event, seq int64) ([]byte, Event, error) {
	if (ev.Type == EventQuestion || ev.Type == EventAnswer) && ev.ID != "" {
		if err := CheckQuestionID(ev.ID); err != nil {
			return nil, ev, err
		}
	}
	ev.Seq = seq
	if ev.At == 0 {
		ev.At = Now()
	}
	if ev.Type == "" {
		ev.Type = EventStatus
	}
	ev.clip()
	b, err := marshalLine(ev)
	if err != nil {
		return nil, ev, err
	}
	return b, ev, nil
}

// clip bounds every string and list of the event (MaxEventText and the
// limits beside it), making each valid UTF-8. An id that is not an id
// (ValidID) is dropped, and a question or an answer carrying one, which
// a job can append by hand, is read as a status that says it was refused:
// it asks nothing, so no hint to answer it is ever shown.
func (ev *Event) clip() {
	if ev.ID != "" && !ValidID(ev.ID) {
		ev.ID = ""
		if ev.Type == EventQuestion || ev.Type == EventAnswer {
			what := "an answer"
			if ev.Type == EventQuestion {
				what = "a question"
			}
			ev.Text = "(not relayed as " + what + ": its id is an " + ErrInvalidID.Error() + ") " + ev.Text
			ev.Type, ev.Options = EventStatus, nil
		}
	}
	ev.Text = clipValid(ev.Text, MaxEventText)
	ev.Type = clipValid(ev.Type, MaxEventWord)
	ev.State = State(clipValid(string(ev.State), MaxEventWord))
	ev.Worker = clipValid(ev.Worker, MaxEventWorker)
	if len(ev.Options) > MaxEventOptions {
		ev.Options = ev.Options[:MaxEventOptions:MaxEventOptions]
	}
	copied := false // the caller's slice is not written to
	for i, o := range ev.Options {
		if len(o) > MaxEventOption || !utf8.ValidString(o) {
			if !copied {
				ev.Options, copied = append([]string(nil), ev.Options...), true
			}
			ev.Options[i] = clipValid(o, MaxEventOption)
		}
	}
}

func clipValid(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return clip(s, max)
}

// marshalLine encodes v as one JSON line without HTML escaping: a job's
// "<" is one byte in the tree, not the six of "\u003c".
func marshalLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// openAppend opens (creating) an append-only file of the tree, refusing a
// symlink or anything else in its place.
func openAppend(dir *os.Root, name string) (*os.File, error) {
	// O_RDWR, not O_WRONLY: AppendEvent counts the lines before it writes.
	f, fi, err := openRegular(dir, name, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	lfi, err := dir.Lstat(name)
	if err == nil && !os.SameFile(fi, lfi) {
		err = fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kind(lfi))
	}
	if err != nil {
		f.Close()
		return nil, err
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
	n, _, err := countLinesPartial(f)
	return n, err
}

// countLinesPartial is countLines, and tells whether the last line lacks
// its newline (it was counted).
func countLinesPartial(f *os.File) (int64, bool, error) {
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
			return 0, false, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, last != '\n', nil
}

// endPartial puts a newline before an event line when the file's last line
// lacks its own (a writer died mid-line, or printf'd without one): that
// line was counted as a line of its own, so it must end before this one
// starts, or this event would share its line and its seq would be one
// more than its line number.
func endPartial(line []byte) []byte {
	return append([]byte{'\n'}, line...)
}

// Clip cuts s to at most max bytes at a rune boundary, marking the cut
// with "…", as every field of an event is clipped.
func Clip(s string, max int) string { return clip(s, max) }

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
		ev.clip()
		return ev
	}
	return Event{Seq: seq, Type: EventStatus, Text: clipValid(string(trim), MaxEventText)}
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
