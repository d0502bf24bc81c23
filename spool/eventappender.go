package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

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
