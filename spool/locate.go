package spool

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultRoot is the system spool, the package's: /var/spool/vm.
const DefaultRoot = "/var/spool/vm"

// Locate says where the spool is (the path of its root, to give Open or
// Create), the way docs/contract.md says: the --spool flag wins, then
// $SPOOL_DIR, then $JOBS_DIR (the Python tools' name), then /var/spool/vm
// for root; for anyone else the per-user spool,
// $XDG_STATE_HOME/vmspool (or ~/.local/state/vmspool), if it exists,
// else the system spool /var/spool/vm if it exists and the caller may
// read it (the service user and the spool's group: the people the
// package makes it for), else the per-user spool's path.
//
// getenv is passed in so that the library never reads the environment behind
// its caller's back; cmd/ passes os.Getenv.
func Locate(flag string, getenv func(string) string, uid int) string {
	return locate(flag, getenv, uid, DefaultRoot, canRead)
}

// locate is Locate with the system spool at system, and readable says
// whether the caller may read a directory (a test's).
func locate(flag string, getenv func(string) string, uid int, system string, readable func(string) bool) string {
	if flag != "" {
		return flag
	}
	if d := getenv("SPOOL_DIR"); d != "" {
		return d
	}
	if d := getenv("JOBS_DIR"); d != "" {
		return d
	}
	if uid == 0 {
		return system
	}
	user := userSpool(getenv)
	if isDir(user) {
		return user
	}
	if isDir(system) && readable(system) {
		return system
	}
	return user
}

// The access(2) modes: read and search.
const (
	rOK = 0x4
	xOK = 0x1
)

// userSpool is the per-user spool's path.
func userSpool(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "vmspool")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "state", "vmspool")
}

// canRead says whether the caller may list dir and open what is in it
// (access(2), by its real ids).
func canRead(dir string) bool { return syscall.Access(dir, rOK|xOK) == nil }

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// missingAdvice is what to do about a spool dir that does not exist,
// right for who asks: the system spool's group when the system spool is
// there but closed to the caller, else where the spool is said.
func missingAdvice(dir string) string {
	return adviceFor(dir, DefaultRoot, canRead)
}

func adviceFor(dir, system string, readable func(string) bool) string {
	if dir == system {
		return "start spoold, which makes it (the package's spoold.service does), or set SPOOL_DIR or --spool to another spool"
	}
	if fi, err := os.Stat(system); err == nil && fi.IsDir() && !readable(system) {
		group := "its group"
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			group = groupText(st.Gid)
		}
		return "the system spool " + system + " is there but closed to you: join " + group +
			", or set SPOOL_DIR or --spool to a spool of your own"
	}
	return "mkdir -p " + dir + " (spoold makes the rest), or set SPOOL_DIR or --spool to the spool"
}

// WriteAdvice is what to do when the caller may not write the spool:
// join the group of its root (named, with the command), or ask its
// owner. For an error that wraps fs.ErrPermission.
func (s *Spool) WriteAdvice() string {
	var st syscall.Stat_t
	if err := syscall.Fstat(s.dirfd(), &st); err != nil {
		return "ask the spool's owner for write access, or set SPOOL_DIR or --spool to a spool of your own"
	}
	group := groupText(st.Gid)
	if st.Mode&0o020 == 0 {
		owner := "uid " + strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(owner[4:]); err == nil {
			owner = u.Username
		}
		return fmt.Sprintf("its mode %04o lets only its owner, %s, write it: submit as them (sudo -u %s spool submit ...), or set SPOOL_DIR or --spool to a spool of your own",
			st.Mode&0o7777, owner, strings.TrimPrefix(owner, "uid "))
	}
	return "join " + group + ", or set SPOOL_DIR or --spool to a spool of your own"
}

// groupText names a spool's group for one who should join it, with the
// command that does.
func groupText(id uint32) string {
	gid := strconv.FormatUint(uint64(id), 10)
	if g, err := user.LookupGroupId(gid); err == nil {
		return "its group " + g.Name + " (sudo usermod -aG " + g.Name + " $USER, then log in again)"
	}
	return "its group (gid " + gid + ")"
}

// closedAdvice is what to do about a spool dir the caller may not open.
func closedAdvice(dir string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "ask the spool's owner for access, or set SPOOL_DIR or --spool to a spool of your own"
	}
	return "join " + groupText(st.Gid) + ", or set SPOOL_DIR or --spool to a spool of your own"
}
