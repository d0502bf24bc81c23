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
)

// Ending is what End needs to end a job.
type Ending struct {
	// Result is what the job ended with: its Job and a final State at
	// least. Finished is stamped if zero.
	Result *Result
	// Lease is the claim being ended: the caller's own, or the one of a
	// dead worker it judged (a recovery, fsck). It must still be the
	// job's lease (Same), or End writes nothing and returns ErrLeaseLost.
	// Nil only for a job that nothing queued or holds (fsck's spec that
	// does not parse, with no marker).
	Lease *Lease
	// Worker is who ends the job: the end event's worker.
	Worker string
	// Progress is the chat's document as the run that holds the chat's
	// lock keeps it: End adds the end event to it and writes it done. Nil:
	// End writes the chat's document itself (NoteProgress), when the chat
	// is free and its document is not a later job's.
	Progress *Progress
	// BeforeResult, if set, is called once the final progress document is
	// written and before the result is: for a test that looks at the job
	// in that window. The daemons leave it nil.
	BeforeResult func()
	// Holding, if set, is asked before each step: false means the caller
	// may have lost the lease without the spool saying so (spoold's fence
	// fired: the spool did not answer for half a lease, and another host
	// may take the job over once the lease has passed), and End stops
	// there with ErrLeaseLost, writing nothing more. What it does not
	// promise: a step already on its way when the spool stopped answering
	// may still be carried out when it answers again (no client can call
	// it back).
	Holding func() bool

	// crashAfter, for the tests of this package, stops End after that many
	// of its steps, as a kill -9 there would.
	crashAfter int
}

// End ends a job. It is the one way a job ends, whoever ends it (a run, a
// job refused or cancelled before it ran, a dead worker's job with no
// attempt left, fsck), and every ended job gets one end event and one
// result, in one order:
//
//  1. the ending is recorded in the lease (its result, fsync'd but not the
//     directory: whichever of the two leases a power loss leaves reads
//     whole). From here on, whoever finds the lease, a recoverer or fsck,
//     finishes this end and never begins another;
//  2. the end event is appended to <job>.events;
//  3. the chat's last progress document is written, done: before the
//     result, so that a watcher that starts after the result never takes
//     it for a run of its own (docs/contract.md, invariant 7);
//  4. the result is written, durably: the job has ended (invariant 4);
//  5. the lease is removed, and then the job's bell (doorbell.go), a
//     hint that a crash before leaves to a poller or gc.
//
// A crash between any two steps leaves the lease with its ending, and End
// called again with that lease (recoverJob, fsck) resumes: the recorded
// result wins over e.Result, an end event already appended is not appended
// again, and a result already written leaves only the lease to remove.
//
// What End does not promise: an events file that is not a regular file
// (a planted FIFO) gets no end event; the progress document is advisory,
// and a failure to write it does not stop the end; the events and the
// progress are not fsync'd, so after a power loss only the result and the
// lease are sure to be as they were left.
//
// On a shared filesystem that stopped answering, a rename asked for may be
// carried out long after the lease was checked, when another host has
// taken the job over: then the result just written is taken back (if it is
// still this attempt's), the new owner's lease is left alone, and
// ErrLeaseLost is returned.
func (s *Spool) End(e Ending) error {
	res := e.Result
	if res == nil {
		return errors.New("end: no result")
	}
	if err := CheckJobID(res.Job); err != nil {
		return err
	}
	if !res.State.Final() {
		return fmt.Errorf("job %s: end: %q is not a final state", res.Job, res.State)
	}
	job := res.Job
	resumed := e.Lease == nil
	var cur *Lease
	if e.Lease != nil {
		var err error
		cur, _, err = s.ReadLease(job)
		if err != nil || !cur.Same(e.Lease) {
			return fmt.Errorf("job %s: end: %w", job, ErrLeaseLost)
		}
		if r := cur.Ending; r != nil && r.Job == job && r.State.Final() {
			res, resumed = r, true
			if _, err := s.root.Lstat(job + res.State.Ext()); err == nil {
				// Only the last step was left.
				if err := s.dropLease(res, e.Lease); err != nil {
					return err
				}
				s.Unring(job)
				return nil
			}
		}
	}
	if res.Finished == 0 {
		res.Finished = Stamp(s.Now())
	}
	var ev *Event
	steps := []func() error{
		func() error { // 1. the ending, in the lease
			if cur == nil || resumed {
				return nil
			}
			rec := *cur
			rec.Ending = res
			b, err := json.Marshal(&rec)
			if err != nil {
				return err
			}
			if err := writeSynced(s.root, job+ExtRunning, append(b, '\n')); err != nil {
				return fmt.Errorf("job %s: recording the end in the lease: %w", job, err)
			}
			return nil
		},
		func() (err error) { // 2. the end event
			ev, err = s.appendEnd(res, e.Worker, resumed)
			return err
		},
		func() error { // 3. the last progress, done
			if p := e.Progress; p != nil {
				if ev != nil {
					p.Add(*ev)
				}
				p.State, p.Done, p.Exit, p.Error, p.Question = res.State, true, res.Exit, res.Error, nil
				s.WriteProgress(p)
			} else {
				l := e.Lease
				if l == nil {
					l = &Lease{Job: job, Attempt: res.Attempt}
				}
				s.NoteProgress(l, res.Chat, res.State, res, e.Worker)
			}
			if e.BeforeResult != nil {
				e.BeforeResult()
			}
			return nil
		},
		func() error { return s.writeResult(res) }, // 4. the result
		func() error { // 5. the lease, gone
			if e.Lease == nil {
				return nil
			}
			return s.dropLease(res, e.Lease)
		},
	}
	for i, step := range steps {
		if e.crashAfter > 0 && i == e.crashAfter {
			return errCrashed
		}
		if e.Holding != nil && !e.Holding() {
			return fmt.Errorf("job %s: end: the spool did not answer while the lease lasted: %w", job, ErrLeaseLost)
		}
		if err := step(); err != nil {
			return err
		}
	}
	// Ended: its bell goes (doorbell.go; a crash before leaves it to a
	// poller or gc).
	s.Unring(job)
	return nil
}

// errCrashed is what End returns when a test stopped it half-way.
var errCrashed = errors.New("end: stopped half-way, as by a crash")

// EndText is the end event's text: the state, the exit status if there is
// one, and the first line of the error.
func EndText(r *Result) string {
	text := string(r.State)
	if r.Exit != nil {
		text += fmt.Sprintf(" (exit %d)", *r.Exit)
	}
	if r.Error != nil && *r.Error != "" {
		line, _, _ := strings.Cut(*r.Error, "\n")
		text += ": " + line
	}
	return text
}

// appendEnd appends the end event of r, unless resumed and the events
// already end with it. It returns the event, or nil if there is none (the
// events file is not a regular file).
func (s *Spool) appendEnd(r *Result, worker string, resumed bool) (*Event, error) {
	ev := Event{Type: EventEnd, Text: EndText(r), Exit: r.Exit, State: r.State, Worker: worker, Attempt: r.Attempt}
	if resumed {
		if last, ok := s.lastEvent(r.Job); ok && last.Type == EventEnd && last.Attempt == r.Attempt && last.State == r.State {
			return &last, nil
		}
	}
	ev, err := s.AppendEvent(r.Job, ev)
	if errors.Is(err, ErrNotRegular) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ev, nil
}

// endEventTail is how much of the end of an events file lastEvent reads:
// an end event is one short line (its text is one line of the error,
// clipped to MaxEventText).
const endEventTail = 4 * MaxEventText

// lastEvent is the last whole line of <job>.events, read from its tail
// only: a file flooded to any size costs one read. Its seq is not known
// (0).
func (s *Spool) lastEvent(job string) (Event, bool) {
	f, fi, err := openRegular(s.root, job+ExtEvents, os.O_RDONLY)
	if err != nil {
		return Event{}, false
	}
	defer f.Close()
	off := max(0, fi.Size()-endEventTail)
	b := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return Event{}, false
	}
	b = b[:n]
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return Event{}, false
	}
	b = b[:end]
	start := bytes.LastIndexByte(b, '\n')
	if start < 0 && off > 0 {
		return Event{}, false // the line began before the tail: not an end event of ours
	}
	return ParseEventLine(b[start+1:], 0), true
}

// dropLease is the end's last step: the lease goes, if it is still l.
func (s *Spool) dropLease(r *Result, l *Lease) error {
	cur, _, err := s.ReadLease(r.Job)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err == nil && !cur.Same(l):
		if mine, rerr := s.ReadResult(r.Job, r.State); rerr == nil && mine.Worker == r.Worker && mine.Attempt == r.Attempt {
			removeName(s.root, r.Job+r.State.Ext())
			syncDir(s.root)
		}
		return fmt.Errorf("job %s: the result was written after the job was taken over: %w", r.Job, ErrLeaseLost)
	}
	// The removal is not synced: if a power loss brings the lease back, it
	// stands beside the result, which wins (invariant 4), and the next
	// recoverer or fsck removes it.
	if err := s.root.Remove(r.Job + ExtRunning); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("job %s: removing lease: %w", r.Job, err)
	}
	return nil
}

// NoteProgress writes the chat's document for a job its writer does not
// run: ended (through End) without running, or queued again by a
// recovery. It is the one way such a job's progress is written: the job's
// events folded into the document, its state st and, when st is final
// (res given), done with res's exit and error. The chat's document is
// left alone while another job owns it: the chat's lock is held (a job of
// the chat runs), or the document is of a job claimed after l.
func (s *Spool) NoteProgress(l *Lease, chat string, st State, res *Result, worker string) error {
	if !ValidID(chat) {
		return nil
	}
	f, ok, err := s.LockChat(chat)
	if err != nil || !ok {
		return err
	}
	defer f.Close()
	p, err := s.ReadProgress(chat)
	switch {
	case err == nil && p.Job == l.Job:
		// This job's document, brought up to date.
	case err == nil && p.Started > l.Claimed:
		return nil // a later job's
	default:
		p = &Progress{Job: l.Job, Chat: chat, Started: l.Claimed, Attempt: l.Attempt, Worker: worker}
	}
	s.NewEventReader(l.Job).Each(p.Add)
	p.State, p.Question = st, nil
	if st.Final() && res != nil {
		p.Done, p.Exit, p.Error = true, res.Exit, res.Error
	}
	return s.WriteProgress(p)
}
