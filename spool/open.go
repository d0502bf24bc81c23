package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// The one protected open of the tree.
//
// Every name of the tree this package opens, to read, write, append, lock
// or create, is opened by openRegular (an os.Root and a slash-separated
// name) or openRegularAt (a directory's descriptor and one name, for the
// loops over thousands of names in List and SubmitBatch, where an os.File
// costs more than the open itself). Both add openFlags, so that a symlink
// never stands in for a document (O_NOFOLLOW; os.Root keeps one on the
// way from leading out of the tree) and a FIFO never blocks the opener,
// whether it reads or writes (O_NONBLOCK: a FIFO opened for writing with
// no reader fails at once with ENXIO), and both check what they opened
// with fstat: anything but a plain file is refused (ErrNotRegular).
// Directories are opened by openDir, with O_DIRECTORY, which refuses a
// FIFO before it is opened.
//
// The opens not made here are the atomic write's (internal/atomicfile,
// called by writeFile and writeAt): its temporaries, an
// O_CREAT|O_EXCL|O_NOFOLLOW of a fresh random name through the
// directory's handle (renameio's, through the os.Root, for a durable
// replace), which can be nothing but a new plain file (O_EXCL never
// follows a link), and the directory it syncs after a rename (syncDir
// too), opened O_DIRECTORY|O_NOFOLLOW through the os.Root. TestOneOpen
// keeps every other open of this package in these three functions.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// euid is this process's effective uid: root's writes take their
// directory's owner (settle).
var euid = os.Geteuid()

// openRegular opens name for flag (os.O_RDONLY, O_RDWR|O_APPEND|O_CREATE
// for a log, O_WRONLY|O_CREATE for a claim mark...) and makes sure
// it is a plain file under that very name. A file opened with O_CREATE is
// settled: the tree's mode, and its directory's owner when root made it.
// It costs two system calls; `spool ls` makes one such open per job.
func openRegular(dir *os.Root, name string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := dir.OpenFile(name, flag|openFlags, FileMode)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
			return nil, nil, err
		}
		// A symlink at name fails with ELOOP, a FIFO opened for writing
		// with ENXIO: say what stands there.
		if lfi, lerr := dir.Lstat(name); lerr == nil && !lfi.Mode().IsRegular() {
			return nil, lfi, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kind(lfi))
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kind(fi))
	}
	if flag&os.O_CREATE != 0 {
		settle(f, fi, func() (fs.FileInfo, error) { return dir.Lstat(path.Dir(name)) })
	}
	return f, fi, nil
}

// openRegularAt is openRegular for one name (no "/") of the directory open
// as dirfd, by plain system calls, to read (List, and the batch's syncs
// where syncfs is refused). It returns the descriptor and what fstat said
// of it.
func openRegularAt(dirfd int, name string, flag int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dirfd, name, flag|openFlags, 0)
	if err != nil {
		if err == unix.ENOENT {
			return -1, st, err
		}
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			return -1, st, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kindOfMode(st.Mode))
		}
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kindOfMode(st.Mode))
	}
	return fd, st, nil
}

// openDir opens the directory name of dir ("." for dir itself), to list
// or sync it: never through a symlink, never anything but a directory.
func openDir(dir *os.Root, name string) (*os.File, error) {
	return dir.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|openFlags, 0)
}

// settle gives a file opened with O_CREATE the tree's mode (O_CREATE
// obeys the umask; the tree's modes do not) and, when root made it, the
// owner and group of the directory it is in: root using `spool submit`,
// `spool answer` or the Python client on a spool that belongs to the
// service user writes documents that user's daemons can read
// (docs/operations.md, "Who owns what"). Only a file this process owns
// with one link is touched: a hard link may name a file outside the tree,
// and another user's file is never given away. (The atomic writes'
// temporaries are new files, given their mode and owner by
// internal/atomicfile: treeOpts.)
func settle(f *os.File, fi fs.FileInfo, parent func() (fs.FileInfo, error)) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink != 1 || int(st.Uid) != euid {
		return
	}
	if fi.Mode().Perm() != FileMode {
		f.Chmod(FileMode)
	}
	if euid != 0 {
		return
	}
	pfi, err := parent()
	if err != nil || !pfi.IsDir() {
		return
	}
	if pst, ok := pfi.Sys().(*syscall.Stat_t); ok && (pst.Uid != st.Uid || pst.Gid != st.Gid) {
		f.Chown(int(pst.Uid), int(pst.Gid))
	}
}

// owner is a directory's owner and group, which root's new files take
// (settle); set is false when nothing is to be changed.
type owner struct {
	uid, gid int
	set      bool
}

// dirOwner says whose root's new files in the directory dirfd become:
// its owner's, when this process is root and the directory is not
// root:root.
func dirOwner(dirfd int) owner {
	if euid != 0 {
		return owner{}
	}
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) != nil {
		return owner{}
	}
	return ownerOf(st.Uid, st.Gid)
}

// rootOwner is dirOwner for a directory held as an os.Root.
func rootOwner(dir *os.Root) owner {
	if euid != 0 {
		return owner{}
	}
	fi, err := dir.Lstat(".")
	if err != nil {
		return owner{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return owner{}
	}
	return ownerOf(st.Uid, st.Gid)
}

func ownerOf(uid, gid uint32) owner {
	if uid == 0 && gid == 0 {
		return owner{}
	}
	return owner{uid: int(uid), gid: int(gid), set: true}
}

func kind(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}

// kindOfMode is kind for a raw st_mode.
func kindOfMode(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "not a plain file"
}
