package spoold

import (
	"errors"
	"syscall"
	"time"
)

// signalGroup sends sig to every process of the group pgid. A group that is
// gone already is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return errors.New("no process group")
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// attemptAlive reports whether any process of an attempt of job still
// lives on this host: every process of an attempt inherits the flock on
// <job>.json, and the kernel drops it only when the last of them is gone. A
// zombie holds no descriptor, so an unreaped orphan does not count; a pid,
// which a newer process may reuse, is never asked.
func (d *Daemon) attemptAlive(job string) bool {
	held, err := d.s.SpecLocked(job)
	return err == nil && held
}

// endAttempt ends what is left of an attempt of job in process group pgid:
// SIGTERM to the group, SIGKILL after the kill grace, and waits until no
// process holds the spec lock. It returns false if some process still
// holds it after that (one that left the group, or pgid unknown), which
// the caller must treat as still running.
func (d *Daemon) endAttempt(job string, pgid int, grace time.Duration) bool {
	if !d.attemptAlive(job) {
		return true
	}
	if pgid > 1 {
		signalGroup(pgid, syscall.SIGTERM)
	}
	if waitFree(d, job, grace) {
		return true
	}
	if pgid > 1 {
		signalGroup(pgid, syscall.SIGKILL)
	}
	return waitFree(d, job, 2*time.Second)
}

func waitFree(d *Daemon, job string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; ; {
		if !d.attemptAlive(job) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}
