package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// AppendAnswer appends the answer event of question ev.ID to the job's
// events, unless the events hold one already; appended says whether this
// call wrote it. It is how every answer event is written, so that a
// question answered has exactly one: two writers may take the same answer
// from chats/<chat>/answer.json, spoold's relay and `spool ask` itself
// (which must, since the relay looks only at the run's open question, and
// misses an answer whose job has moved on to its next question before
// spoold read the file). The look and the append are made under the
// events file's flock, the one every append takes, so that whichever
// writer comes second finds the first one's line.
//
// The look reads the whole file, under the lock: an answer is rare, and
// a job appending meanwhile waits for it (BenchmarkAppendAnswer: tens of
// milliseconds over the 64 MiB a job's events may reach).
func (s *Spool) AppendAnswer(job string, ev Event) (Event, bool, error) {
	if err := CheckJobID(job); err != nil {
		return ev, false, err
	}
	if ev.Type != EventAnswer {
		return ev, false, fmt.Errorf("job %s: an answer event of type %q", job, ev.Type)
	}
	if err := CheckQuestionID(ev.ID); err != nil {
		return ev, false, err
	}
	f, err := openAppend(s.root, job+ExtEvents)
	if err != nil {
		return ev, false, fmt.Errorf("job %s: events: %w", job, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return ev, false, fmt.Errorf("job %s: events: lock: %w", job, err)
	}
	found, seq, partial, err := findAnswer(f, ev.ID)
	if err != nil {
		return ev, false, fmt.Errorf("job %s: events: %w", job, err)
	}
	if found != nil {
		return *found, false, nil
	}
	// A last line without its newline counts as a line of its own
	// (countLinesPartial), and ends before this one.
	b, ev, err := eventLine(ev, seq+1)
	if err != nil {
		return ev, false, err
	}
	if partial {
		b = endPartial(b)
	}
	if _, err := f.Write(b); err != nil {
		return ev, false, fmt.Errorf("job %s: events: %w", job, err)
	}
	return ev, true, nil
}

// findAnswer reads the events of f as a reader reads them, for the answer
// event of question id: it returns that event (nil: none), the lines
// counted as countLinesPartial counts them, and whether the last one
// lacks its newline. Only a line that holds id is decoded, and a line too
// long to relay (MaxEventLine) is no answer, as it is no event to a
// reader.
func findAnswer(f *os.File, id string) (found *Event, lines int64, partial bool, err error) {
	want := []byte(id)
	buf := make([]byte, 64<<10)
	var part []byte // a line begun in an earlier read
	long := false   // the line under way is past MaxEventLine
	var off int64
	for {
		k, rerr := f.ReadAt(buf, off)
		b := buf[:k]
		off += int64(k)
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			piece := b
			if i >= 0 {
				piece = b[:i]
			}
			switch {
			case long:
			case len(part)+len(piece) > MaxEventLine:
				long, part = true, part[:0]
			case i >= 0 && len(part) == 0:
				// A whole line in this read: looked at where it is.
			default:
				part = append(part, piece...)
			}
			if i < 0 {
				break
			}
			lines++
			line := piece
			if len(part) > 0 {
				line = part
			}
			if found == nil && !long && bytes.Contains(line, want) {
				if e := ParseEventLine(line, lines); e.Type == EventAnswer && e.ID == id {
					found = &e
				}
			}
			part, long = part[:0], false
			b = b[i+1:]
		}
		if errors.Is(rerr, io.EOF) || k == 0 {
			break
		}
		if rerr != nil {
			return nil, 0, false, rerr
		}
	}
	if len(part) > 0 || long {
		return found, lines + 1, true, nil
	}
	return found, lines, false, nil
}
