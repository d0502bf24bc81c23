package spool

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessStart returns the start time of pid, in clock ticks since boot
// (field 22 of /proc/PID/stat). With the pid it names one process for the
// life of a boot: a pid reused by a newer process has a later start.
func ProcessStart(pid int) (uint64, error) {
	_, st, err := processStat(pid)
	return st, err
}

// ProgramPrefix begins the command name of every program of this project
// that holds leases (spoold, spool): a live process of another name is
// never believed to hold one (ByProcess).
const ProgramPrefix = "spool"

// ProcessName returns the command name of pid (/proc/PID/comm, at most 15
// bytes).
func ProcessName(pid int) (string, error) {
	comm, _, err := processStat(pid)
	return comm, err
}

// processStat returns the command name (field 2 of /proc/PID/stat, at
// most 15 bytes) and the start time of pid.
func processStat(pid int) (string, uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 20 {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// A zombie has exited: only its parent has not read its status yet.
	if f[0] == "Z" || f[0] == "X" {
		return "", 0, fmt.Errorf("process %d: %w (exited)", pid, os.ErrProcessDone)
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return string(b[i+1 : j]), st, err
}

// BootID returns the kernel's boot id, which tells one boot of a host from
// the next.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Alive reports whether the process that a lease names still runs on this
// host: the same boot, the pid present, and (when the lease recorded it)
// the same start time.
func (l *Lease) Alive(host, boot string) (known, alive bool) {
	known, alive, _ = l.alive(host, boot)
	return known, alive
}

// alive is Alive, with the live process's command name, from the one
// read of its /proc/PID/stat.
func (l *Lease) alive(host, boot string) (known, alive bool, comm string) {
	if l.Host != host {
		return false, false, ""
	}
	if l.Boot != "" && boot != "" && l.Boot != boot {
		return true, false, ""
	}
	comm, st, err := processStat(l.PID)
	if err != nil {
		return true, false, ""
	}
	if l.PIDStart != 0 && st != l.PIDStart {
		return true, false, ""
	}
	return true, true, comm
}

// ByProcess reports whether the lease's process decides its life, as seen
// from this host (host, boot), and if so whether it lives. It decides on
// the lease's own host: a lease of another boot, or whose pid is gone or
// reused, is dead at once; one whose process lives, named exactly (the
// pid's start time and the boot recorded) and a program of this project
// (spoold, or spool fsck ending a job: a command name that begins with
// "spool"), is alive whatever its heartbeat's age, since a paused or
// slowed worker is alive (docs/contract.md, invariant 4). Elsewhere, for
// a lease that names its process less exactly (an older one), or for one
// that names another program's process (a lease planted naming pid 1,
// which would otherwise hold its job for ever), the heartbeat decides.
func (l *Lease) ByProcess(host, boot string) (decides, alive bool) {
	known, alive, comm := l.alive(host, boot)
	switch {
	case !known:
		return false, false
	case !alive:
		return true, false
	case l.PIDStart == 0 || l.Boot == "" || boot == "":
		return false, true
	}
	return strings.HasPrefix(comm, ProgramPrefix), true
}
