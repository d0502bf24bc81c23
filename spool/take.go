package spool

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"golang.org/x/sys/unix"
)

// How a name is taken without replacing what stands there (take), as found
// to work on the spool's filesystem: the first that the filesystem does
// not refuse is kept for the life of the Spool.
const (
	// renameat2(RENAME_NOREPLACE): one system call, and the document
	// still arrives by rename (ext4, xfs, btrfs, tmpfs, and FUSE servers
	// that pass the flag on, powerfs among them).
	takeRename2 int32 = iota
	// link(2) of the temporary, then its unlink: NFS and sshfs, which
	// refuse the flag. The name appears whole, but a watcher of the
	// directory sees it created (IN_CREATE) rather than moved in.
	takeLink
	// Neither (a FUSE filesystem without hard links): a check, then
	// rename(2). Two steps, so two submitters of one explicit id may
	// both succeed there; ids spool makes (ULIDs) never meet.
	takeCheck
)

// take moves the temporary tmp of the directory dirfd to name only if
// name is free, in one atomic step: of two takers of one name, exactly one
// succeeds, and the other gets an error wrapping fs.ErrExist (unix.EEXIST)
// and its temporary back. This is what makes a job id a job's: a spec is
// taken, never renamed over another's.
func (s *Spool) take(dirfd int, tmp, name string) error {
	switch s.takeHow.Load() {
	case takeRename2:
		err := unix.Renameat2(dirfd, tmp, dirfd, name, unix.RENAME_NOREPLACE)
		switch err {
		case nil:
			return nil
		case unix.EEXIST:
			return takenError(name)
		case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
			s.takeHow.CompareAndSwap(takeRename2, takeLink)
		default:
			return err
		}
		fallthrough
	case takeLink:
		err := unix.Linkat(dirfd, tmp, dirfd, name, 0)
		if err == nil {
			// The temporary's name goes; the directory's sync that
			// follows makes both changes durable together.
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
		if err == unix.EEXIST || existsAt(dirfd, name) {
			return takenError(name)
		}
		switch err {
		case unix.EPERM, unix.ENOSYS, unix.EOPNOTSUPP:
			s.takeHow.CompareAndSwap(takeLink, takeCheck)
		default:
			return err
		}
		fallthrough
	default:
		if existsAt(dirfd, name) {
			return takenError(name)
		}
		return unix.Renameat(dirfd, tmp, dirfd, name)
	}
}

func existsAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func sameFileAt(dirfd int, a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Fstatat(dirfd, a, &sa, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		unix.Fstatat(dirfd, b, &sb, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func takenError(name string) error {
	return fmt.Errorf("%s: %w", name, unix.EEXIST)
}

// takeStrategy is for tests: which way take works on this Spool's
// filesystem so far.
func (s *Spool) takeStrategy() int32 { return s.takeHow.Load() }

// writeTempAt writes data to a new temporary for name in the directory
// dirfd (the one protected open, O_EXCL: never a link, never an existing
// file), with the tree's mode and, when root writes, the directory's
// owner (own), fsync'd if durable. With batch, the umask read once at the
// first batch is trusted to leave the tree's mode whole (umaskKeeps:
// 10,000 system calls fewer in a batch of 5,000); a lone write pays the
// fchmod rather than trust a umask its process may have changed since. It returns the temporary's name; the
// caller moves it into place (take, or renameat to replace) or removes it.
func writeTempAt(dirfd int, name string, data []byte, durable, batch bool, own owner) (string, error) {
	for try := 0; ; try++ {
		tmp := tempName(name)
		fd, _, err := openRegularAt(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		if err == unix.EEXIST && try < 100 {
			continue
		}
		if err != nil {
			return "", err
		}
		if !batch || !umaskKeeps() {
			err = unix.Fchmod(fd, uint32(FileMode))
		}
		if own.set && err == nil {
			err = unix.Fchown(fd, own.uid, own.gid)
		}
		for len(data) > 0 && err == nil {
			var n int
			n, err = unix.Write(fd, data)
			data = data[max(n, 0):]
		}
		if durable && err == nil {
			err = unix.Fsync(fd)
		}
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
		if err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return "", err
		}
		return tmp, nil
	}
}

// tempName is a fresh temporary's name for name: hidden (a leading dot,
// which no id has) and random, so that two writers never share one.
func tempName(name string) string {
	return "." + name + strconv.FormatUint(rand.Uint64(), 10)
}
