package spoold

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/spool"
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

// endAttempt ends what is left of an attempt of job: SIGTERM, SIGKILL
// after the grace, and waits until no process holds the spec lock. The
// processes are the group pgid (the lease's) and every process found
// holding the attempt's descriptors (see holders), which covers a lease
// written before its pgid was and a process that left the group. It
// returns false if some process still holds the lock after all that,
// which the caller must treat as still running.
func (d *Daemon) endAttempt(job, chat string, pgid int, grace time.Duration) bool {
	if !d.attemptAlive(job) {
		return true
	}
	signal := func(sig syscall.Signal) {
		if pgid > 1 {
			signalGroup(pgid, sig)
		}
		for _, h := range d.holders(job, chat) {
			if h.pgid > 1 && h.pgid != pgid && h.pgid != syscall.Getpgrp() {
				signalGroup(h.pgid, sig)
			}
			syscall.Kill(h.pid, sig)
		}
	}
	signal(syscall.SIGTERM)
	if waitFree(d, job, grace) {
		return true
	}
	signal(syscall.SIGKILL)
	return waitFree(d, job, 2*time.Second)
}

type holder struct{ pid, pgid int }

// holders finds the processes of an attempt of job by what they inherited
// from spoold: the spec's lock as fd 3 and the chat's lock as fd 4. Both
// together are a fingerprint no reader of the spec has. It reads /proc,
// so it is only called when an attempt must be ended.
func (d *Daemon) holders(job, chat string) []holder {
	spec, err := d.s.Stat(job + spool.ExtSpec)
	if err != nil {
		return nil
	}
	// Without the chat's lock the fingerprint is one descriptor, which a
	// reader of the spec (spool show) may hold too: rather miss an orphan
	// than signal a bystander's process group.
	if !spool.ValidID(chat) {
		return nil
	}
	lock, err := d.s.Stat(spool.ChatDir(chat) + "/" + spool.LockFile)
	if err != nil {
		return nil
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	var out []holder
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == d.pid {
			continue
		}
		fi, err := os.Stat("/proc/" + n + "/fd/3")
		if err != nil || !os.SameFile(fi, spec) {
			continue
		}
		if fi, err := os.Stat("/proc/" + n + "/fd/4"); err != nil || !os.SameFile(fi, lock) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		out = append(out, holder{pid, pgid})
	}
	return out
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
