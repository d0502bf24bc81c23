package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUntrusted is wrapped when a spec or a marker is owned by a user the
// reader was told not to trust (TrustOwners): on a spool another user can
// write, a daemon running as root must not run what that user wrote.
var ErrUntrusted = errors.New("owned by an untrusted user")

// TrustOwners makes ReadSpec and CheckOwner refuse a file owned by anyone
// but these uids (spoold passes its own and root's). Without a call, every
// owner is trusted, as the tree's modes already keep other users out. It
// must be called before the Spool is shared.
func (s *Spool) TrustOwners(uids ...int) {
	s.owners = s.owners[:0]
	for _, u := range uids {
		if !slices.Contains(s.owners, uint32(u)) {
			s.owners = append(s.owners, uint32(u))
		}
	}
}

// CheckOwner returns an error wrapping ErrUntrusted when fi, a file of the
// tree, is owned by a uid TrustOwners did not name (nor a member of the
// group TrustMembers names).
func (s *Spool) CheckOwner(name string, fi fs.FileInfo) error {
	if len(s.owners) == 0 || fi == nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || slices.Contains(s.owners, st.Uid) {
		return nil
	}
	if s.members != nil && s.members.member(st.Uid) {
		return nil
	}
	if s.members != nil {
		return fmt.Errorf("%s: %w (uid %d; only uid %v or a member of group %s may queue jobs here)", s.Path(name), ErrUntrusted, st.Uid, s.owners, s.members.group)
	}
	return fmt.Errorf("%s: %w (uid %d; only uid %v may queue jobs here)", s.Path(name), ErrUntrusted, st.Uid, s.owners)
}

// trustedGroup is a group whose members CheckOwner trusts besides the
// owners (TrustMembers).
type trustedGroup struct {
	group  string
	member func(uid uint32) bool
}

// TrustMembers makes CheckOwner also trust a file whose owner member says
// belongs to group (named in messages): vmgate serve's --writers-group,
// whose members may write gate requests. It adds to TrustOwners, which
// must have been called (without owners, every owner is trusted anyway);
// a nil member removes it. It must be called before the Spool is shared.
// Package spool reads no user database: the caller says who is a member.
func (s *Spool) TrustMembers(group string, member func(uid uint32) bool) {
	if member == nil {
		s.members = nil
		return
	}
	s.members = &trustedGroup{group: group, member: member}
}

// CheckRootSafe returns an error when a process running as root (euid 0)
// must not serve this spool, because another user could put a spec in it
// that root would run:
//
//   - the directory this Spool holds open (not whatever its path names by
//     now) is not owned by root, or group or others may write it;
//   - a directory above it, up to /, found by ".." from that handle, is
//     not owned by root, or group or others may write it without the
//     sticky bit (in a sticky directory such as /tmp nobody but root may
//     move root's entry): its owner could move the spool aside and put
//     their own in its place for every client that opens it by path;
//   - a name on the way of the path given (the spool's own, a directory
//     or a symlink before it) is not root's, or is such a directory: the
//     path could be turned to another spool; and the path must still lead
//     to the directory held.
//
// For any other user it returns nil: such a daemon runs jobs as itself,
// with nothing to give away. Not checked: the directories inside a
// symlink's target on the way that are not above the spool itself.
func (s *Spool) CheckRootSafe(euid int) error {
	if euid != 0 {
		return nil
	}
	dfd := s.dirfd()
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	switch {
	case st.Uid != 0:
		return fmt.Errorf("spool %s: owned by uid %d, and this daemon runs as root: it would run as root whatever that user queues (run it as the spool's owner, as the packaged unit does, or chown the spool to root)", s.RootPath, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("spool %s: mode %04o lets group or others write, and this daemon runs as root: it would run as root whatever they queue (chmod go-w it)", s.RootPath, st.Mode&0o7777)
	}
	if err := s.checkAbove(dfd, st); err != nil {
		return err
	}
	return s.checkPath(st)
}

// unsafeDir says why a directory above the spool (or a name on its path)
// with stat st lets a user other than root change what the spool is, or "".
func unsafeDir(st *unix.Stat_t) string {
	switch {
	case st.Uid != 0:
		return fmt.Sprintf("owned by uid %d", st.Uid)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return fmt.Sprintf("writable by group or others (mode %04o)", st.Mode&0o7777)
	}
	return ""
}

// checkAbove walks up from the held directory by "..", checking each
// directory above it, as the kernel sees them whatever path was given.
func (s *Spool) checkAbove(dfd int, st unix.Stat_t) error {
	cur, err := unix.Openat(dfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	defer func() { unix.Close(cur) }()
	for depth := 0; depth < 4096; depth++ {
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("spool %s: the directory above it: %w", s.RootPath, err)
		}
		unix.Close(cur)
		cur = up
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			return fmt.Errorf("spool %s: the directory above it: %w", s.RootPath, err)
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			return nil // "/" is its own parent
		}
		if why := unsafeDir(&ust); why != "" {
			where, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(up))
			return fmt.Errorf("spool %s: the directory %s above it is %s, and this daemon runs as root: that user could put another spool in its place (chown root and chmod go-w it, or move the spool)", s.RootPath, where, why)
		}
		st = ust
	}
	return fmt.Errorf("spool %s: more than 4096 directories above it", s.RootPath)
}

// checkPath checks every name the spool's path passes through, and that
// the path leads to the directory held (st).
func (s *Spool) checkPath(st unix.Stat_t) error {
	abs, err := filepath.Abs(s.RootPath)
	if err != nil {
		return fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	var pst unix.Stat_t
	if err := unix.Stat(abs, &pst); err != nil || pst.Dev != st.Dev || pst.Ino != st.Ino {
		return fmt.Errorf("spool %s: the path no longer leads to the directory opened (replaced since)", s.RootPath)
	}
	p := "/"
	for _, part := range strings.Split(strings.Trim(abs, "/"), "/") {
		if part == "" {
			continue
		}
		p = filepath.Join(p, part)
		var lst unix.Stat_t
		if err := unix.Lstat(p, &lst); err != nil {
			return fmt.Errorf("spool %s: %s: %w", s.RootPath, p, err)
		}
		if why := unsafeDir(&lst); why != "" {
			return fmt.Errorf("spool %s: %s on its path is %s, and this daemon runs as root: that user could turn the path to another spool (chown root and chmod go-w it)", s.RootPath, p, why)
		}
	}
	return nil
}

// CheckWritable says, in one line with what to do, whether a daemon
// running as the caller's effective ids can write the tree: the root and
// the directories every job's run writes in (a chat's lock and claim mark
// under chats/, its document under progress/, the doorbell). A daemon
// that cannot would start, claim nothing and leave every job queued.
func (s *Spool) CheckWritable() error {
	for _, d := range []string{".", ChatsDir, ProgressDir, DoorbellDir} {
		err := unix.Faccessat(s.dirfd(), d, unix.W_OK|unix.X_OK, unix.AT_EACCESS)
		if err == nil || errors.Is(err, unix.ENOENT) {
			continue
		}
		where := s.RootPath
		if d != "." {
			where = filepath.Join(s.RootPath, d)
		}
		var st unix.Stat_t
		owner := ""
		if unix.Fstatat(s.dirfd(), d, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			owner = fmt.Sprintf(" (it is uid %d's, gid %d's, mode %04o)", st.Uid, st.Gid, st.Mode&0o7777)
		}
		if errors.Is(err, unix.EROFS) {
			return fmt.Errorf("spool %s: cannot write %s: read-only file system: mount it read-write, or give spoold another spool", s.RootPath, where)
		}
		return fmt.Errorf("spool %s: uid %d cannot write %s%s: %v: run spoold as the tree's owner (the package's unit runs it as vmspool), or chown -R the spool to this user",
			s.RootPath, os.Geteuid(), where, owner, err)
	}
	return nil
}
