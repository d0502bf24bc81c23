package spoold

import (
	"bytes"
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

// signal sends sig to the run's processes as far as signals alone reach
// them: its process group, and its cgroup if it has one. It reads no file
// of the spool, so the fence may call it.
func (r *run) signal(sig syscall.Signal) {
	r.procMu.Lock()
	pgid, cg := r.pgid, r.cg
	r.procMu.Unlock()
	if pgid > 1 {
		signalGroup(pgid, sig)
	}
	if cg != nil {
		cg.signal(sig)
	}
}

// attemptAlive reports whether any process of an attempt of job still
// lives on this host: every process of an attempt inherits the flock on
// <job>.json, and the kernel drops it only when the last of them is gone
// (a zombie holds no descriptor, so an unreaped orphan does not count; a
// pid, which a newer process may reuse, is never asked). A process that
// closed that descriptor is still seen where jobs run in cgroups: the
// job's cgroup is then not empty.
func (d *Daemon) attemptAlive(job string) bool {
	if held, err := d.s.SpecLocked(job); err == nil && held {
		return true
	}
	return d.cg != nil && d.cg.of(job).populated()
}

// attempt is what marks the processes of one attempt of a job on this
// host.
type attempt struct {
	job, chat string
	pgid      int        // its process group (the lease's, or the run's)
	sid       int        // its session (the run's own only: 0 otherwise)
	out       *output    // the run's output pipe (the run's own only)
	cg        *jobCgroup // its cgroup, when jobs run in cgroups
}

// alive reports whether any process of the attempt may still live: the
// spec's lock is held, its cgroup is not empty, or a copy of its output
// pipe's write end is open.
func (d *Daemon) alive(a attempt) bool {
	if held, err := d.s.SpecLocked(a.job); err == nil && held {
		return true
	}
	return a.cg != nil && a.cg.populated() || a.out != nil && !a.out.ended()
}

// endAttempt ends what is left of an earlier attempt of job on this host
// (a dead worker's): see end.
func (d *Daemon) endAttempt(job, chat string, pgid int, grace time.Duration) bool {
	a := attempt{job: job, chat: chat, pgid: pgid}
	if d.cg != nil {
		a.cg = d.cg.of(job)
	}
	return d.end(a, grace)
}

// end ends what is left of an attempt: SIGTERM, SIGKILL after the grace,
// then it waits until none of it is alive. The processes are the
// attempt's cgroup (cgroup.kill for SIGKILL), its process group, and
// every process found holding the attempt's descriptors (see holders),
// which covers a lease written before its pgid was, a process that left
// the group, and, without a cgroup, one that left the session too but
// holds the job's output. It returns false if some process still holds
// the spec's lock after all that, which the caller must treat as still
// running; the cgroup, once empty, is removed.
func (d *Daemon) end(a attempt, grace time.Duration) bool {
	if !d.alive(a) {
		if a.cg != nil {
			a.cg.remove()
		}
		return true
	}
	signal := func(sig syscall.Signal, scan bool) {
		if a.pgid > 1 {
			signalGroup(a.pgid, sig)
		}
		if a.cg != nil {
			a.cg.signal(sig)
		}
		if !scan {
			return
		}
		for _, h := range d.holders(a) {
			if h.pgid > 1 && h.pgid != a.pgid && h.pgid != syscall.Getpgrp() {
				signalGroup(h.pgid, sig)
			}
			syscall.Kill(h.pid, sig)
		}
	}
	// With a cgroup the scan of /proc waits for the SIGKILL: what is left
	// then is outside the cgroup (a descriptor passed on).
	signal(syscall.SIGTERM, a.cg == nil)
	if !d.waitGone(a, grace) {
		signal(syscall.SIGKILL, true)
		d.waitGone(a, 2*time.Second)
	}
	held, err := d.s.SpecLocked(a.job)
	gone := err != nil || !held
	if a.cg != nil && !a.cg.populated() {
		a.cg.remove()
	}
	return gone
}

type holder struct{ pid, pgid int }

// holders finds the processes of an attempt by what they inherited from
// spoold: the spec's lock as fd 3 and the chat's lock as fd 4 (both
// together are a fingerprint no reader of the spec has); and, for the
// run's own attempt, its session and any descriptor of its output pipe
// (no other process has one). It reads /proc, so it is only called when
// an attempt must be ended and something of it is left.
func (d *Daemon) holders(a attempt) []holder {
	var spec, lock os.FileInfo
	// Without the chat's lock the fingerprint is one descriptor, which a
	// reader of the spec (spool show) may hold too: rather miss an orphan
	// than signal a bystander's process group.
	if spool.ValidID(a.chat) {
		spec, _ = d.s.Stat(a.job + spool.ExtSpec)
		lock, _ = d.s.Stat(spool.ChatDir(a.chat) + "/" + spool.LockFile)
	}
	var pipe string
	if a.out != nil && a.out.ino != 0 {
		pipe = "pipe:[" + strconv.FormatUint(a.out.ino, 10) + "]"
	}
	if (spec == nil || lock == nil) && a.sid <= 1 && pipe == "" {
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
		pgid, sid, ok := procGroup(pid)
		if !ok {
			continue
		}
		if a.sid > 1 && sid == a.sid || spec != nil && lock != nil && holdsLocks(n, spec, lock) || pipe != "" && holdsFile(n, pipe) {
			out = append(out, holder{pid, pgid})
		}
	}
	return out
}

// procGroup reads a process's group and session from /proc/<pid>/stat.
func procGroup(pid int) (pgid, sid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command's name, which may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return 0, 0, false
	}
	pgid, err1 := strconv.Atoi(string(f[2]))
	sid, err2 := strconv.Atoi(string(f[3]))
	return pgid, sid, err1 == nil && err2 == nil
}

func holdsLocks(pid string, spec, lock os.FileInfo) bool {
	fi, err := os.Stat("/proc/" + pid + "/fd/3")
	if err != nil || !os.SameFile(fi, spec) {
		return false
	}
	fi, err = os.Stat("/proc/" + pid + "/fd/4")
	return err == nil && os.SameFile(fi, lock)
}

// holdsFile reports whether a descriptor of the process links to target
// ("pipe:[inode]").
func holdsFile(pid, target string) bool {
	dir, err := os.Open("/proc/" + pid + "/fd")
	if err != nil {
		return false
	}
	fds, _ := dir.Readdirnames(-1)
	dir.Close()
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/" + pid + "/fd/" + fd); err == nil && l == target {
			return true
		}
	}
	return false
}

// waitGone waits, up to limit, until nothing of the attempt is alive.
func (d *Daemon) waitGone(a attempt, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; ; {
		if !d.alive(a) {
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
