package atomicfile

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// NoReplace is how CloseAtomicallyCreate moves a temporary to a name
// without replacing what stands there, as found to work on one
// filesystem: the first way the filesystem does not refuse is kept. The
// zero value starts with the first way. Keep one per filesystem (a spool
// keeps one for its tree); it is safe for concurrent use.
type NoReplace struct{ way atomic.Int32 }

// Way is one way of NoReplace.
type Way int32

const (
	// RenameNoReplace is renameat2(RENAME_NOREPLACE): one system call,
	// and the file still arrives by rename (ext4, xfs, btrfs, tmpfs, and
	// FUSE servers that pass the flag on).
	RenameNoReplace Way = iota
	// Link is link(2) of the temporary, then its unlink: NFS and sshfs,
	// which refuse the flag. The name appears whole, but a watcher of the
	// directory sees it created (IN_CREATE) rather than moved in.
	Link
	// CheckThenRename is neither (a FUSE filesystem without hard links):
	// a check, then rename(2). Two steps, so two creators of one name may
	// both succeed there.
	CheckThenRename
)

// Way says which way works so far.
func (n *NoReplace) Way() Way { return Way(n.way.Load()) }

// Set starts at w: for a caller that knows its filesystem, and for tests.
func (n *NoReplace) Set(w Way) { n.way.Store(int32(w)) }

// move moves tmp of the directory dirfd to name only if name is free.
func (n *NoReplace) move(dirfd int, tmp, name string) error {
	if n == nil {
		n = new(NoReplace)
	}
	switch Way(n.way.Load()) {
	case RenameNoReplace:
		err := unix.Renameat2(dirfd, tmp, dirfd, name, unix.RENAME_NOREPLACE)
		switch err {
		case nil:
			return nil
		case unix.EEXIST:
			return exists(name)
		case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
			n.way.CompareAndSwap(int32(RenameNoReplace), int32(Link))
		default:
			return err
		}
		fallthrough
	case Link:
		err := unix.Linkat(dirfd, tmp, dirfd, name, 0)
		if err == nil {
			// The temporary's name goes; a directory's sync after makes
			// both changes durable together.
			unix.Unlinkat(dirfd, tmp, 0)
			return nil
		}
		// A link whose reply was lost and that was sent again (NFSv3)
		// fails although the first one made the name: it is then the
		// temporary's own file.
		if sameFileAt(dirfd, tmp, name) {
			unix.Unlinkat(dirfd, tmp, 0)
			return nil
		}
		// sshfs answers a link over an existing name with EPERM (sftp
		// has no EEXIST): what stands there says which it was.
		if err == unix.EEXIST || ExistsAt(dirfd, name) {
			return exists(name)
		}
		switch err {
		case unix.EPERM, unix.ENOSYS, unix.EOPNOTSUPP:
			n.way.CompareAndSwap(int32(Link), int32(CheckThenRename))
		default:
			return err
		}
		fallthrough
	default:
		if ExistsAt(dirfd, name) {
			return exists(name)
		}
		return unix.Renameat(dirfd, tmp, dirfd, name)
	}
}

// ExistsAt says whether anything (a link too, never followed) stands at
// name of the directory dirfd: the check of NoReplace's last fallback, and
// the question a lone writer asks before it takes a name.
func ExistsAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func sameFileAt(dirfd int, a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Fstatat(dirfd, a, &sa, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		unix.Fstatat(dirfd, b, &sb, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func exists(name string) error { return fmt.Errorf("%s: %w", name, unix.EEXIST) }
