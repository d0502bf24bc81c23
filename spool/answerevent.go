package spool

import (
	"errors"
	"fmt"
	"io"
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
// a job appending meanwhile waits for it (less than a second over the
// 64 MiB a job's events may reach).
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
	// The lines already there, read as any reader reads them (a line too
	// long to relay is no answer), and counted for the new line's seq.
	r := &EventReader{s: s, job: job, At: Now}
	var found *Event
	buf := make([]byte, 64<<10)
	var off int64
	for {
		k, rerr := f.ReadAt(buf, off)
		if k > 0 {
			r.feed(buf[:k], func(e Event) bool {
				if found == nil && e.Type == EventAnswer && e.ID == ev.ID {
					found = &e
				}
				return true
			})
			off += int64(k)
		}
		if errors.Is(rerr, io.EOF) || k == 0 {
			break
		}
		if rerr != nil {
			return ev, false, fmt.Errorf("job %s: events: %w", job, rerr)
		}
	}
	if found != nil {
		return *found, false, nil
	}
	// A last line without its newline counts as a line of its own
	// (countLinesPartial), and ends before this one.
	seq, partial := r.seq, len(r.part) > 0 || r.long > 0
	if partial {
		seq++
	}
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
