package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// Result is a job's final document, <job>.done, .failed or .cancelled.
type Result struct {
	Job      string  `json:"job"`
	Chat     string  `json:"chat"`
	State    State   `json:"state"`
	Exit     *int    `json:"exit"`
	Error    *string `json:"error"`
	Started  float64 `json:"started"`
	Finished float64 `json:"finished"`
	Attempt  int     `json:"attempt"`
	First    int     `json:"first_attempt,omitempty"`
	Worker   string  `json:"worker,omitempty"`
	// Limits says which of the job's limits it reached, one phrase each,
	// the limit's name first ("log: cut 3 times, 1.2 GiB not kept (limit
	// 64 MiB)"), for `spool ls` and `spool show`.
	Limits []string `json:"limits,omitempty"`
}

// Errorf sets the result's error text.
func (r *Result) Errorf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.Error = &s
}

// writeResult writes r durably at <job>.<state>: End's fourth step, and
// fsck's replacement of a result that does not parse (a repair, not an
// end: the job's end event was written when it ended).
func (s *Spool) writeResult(r *Result) error {
	if err := CheckJobID(r.Job); err != nil {
		return err
	}
	if !r.State.Final() {
		return fmt.Errorf("job %s: finish: %q is not a final state", r.Job, r.State)
	}
	if r.Finished == 0 {
		r.Finished = Stamp(s.Now())
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := writeFile(s.root, r.Job+r.State.Ext(), append(b, '\n')); err != nil {
		return fmt.Errorf("job %s: writing result: %w", r.Job, err)
	}
	return nil
}

// ReadResult reads the job's result in state st.
func (s *Spool) ReadResult(job string, st State) (*Result, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	if !st.Final() {
		return nil, fmt.Errorf("job %s: %q is not a final state", job, st)
	}
	name := job + st.Ext()
	b, _, err := readFile(s.root, name, MaxDocument)
	if err != nil {
		return nil, fmt.Errorf("job %s: result: %w", job, err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("job %s: result %s: %w: %v", job, s.Path(name), ErrCorrupt, err)
	}
	return &r, nil
}

// RequeueEnded queues a failed or cancelled job again, by renaming its
// result to its marker: one rename, so the job is in exactly one state at
// every instant. The claim that follows starts a new budget of attempts.
func (s *Spool) RequeueEnded(job string) (State, error) {
	if err := CheckJobID(job); err != nil {
		return "", err
	}
	st, err := s.State(job)
	if err != nil {
		return "", err
	}
	if st != Failed && st != Cancelled {
		return st, fmt.Errorf("job %s is %s; only a failed or cancelled job can be queued again", job, st)
	}
	if err := s.root.Remove(job + ExtCancel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("job %s: %w", job, err)
	}
	// A requeue is a submission: the chat's last progress and answer go
	// first (invariant 6).
	if sp, err := s.ReadSpec(job); err == nil {
		if err := s.ClearChat(sp.Chat); err != nil {
			return st, fmt.Errorf("job %s: %w", job, err)
		}
	}
	if err := s.root.Rename(job+st.Ext(), job+ExtReady); err != nil {
		return st, fmt.Errorf("job %s: requeue: %w", job, err)
	}
	s.Ring(job)
	return st, syncDir(s.root)
}
