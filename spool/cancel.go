package spool

import "fmt"

// RequestCancel writes <job>.cancel, a request that the daemon running the
// job (or the next to claim it) ends it.
func (s *Spool) RequestCancel(job, why string) error {
	if err := CheckJobID(job); err != nil {
		return err
	}
	if err := writeFile(s.root, job+ExtCancel, []byte(why+"\n")); err != nil {
		return fmt.Errorf("job %s: cancel: %w", job, err)
	}
	// A queued job's cancel is a daemon's to act on: a hint to those that
	// poll (doorbell.go).
	s.Ring(job)
	return nil
}
