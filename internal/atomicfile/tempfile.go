package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// ErrNeedsDescriptor is returned for what renameio cannot do with
// WithRoot: a write without fsync, or a create that must not replace.
var ErrNeedsDescriptor = errors.New("not with WithRoot (renameio always syncs and replaces): pass the directory's descriptor (InDir)")

// PendingFile is a temporary waiting to take the place of its name in
// CloseAtomicallyReplace or CloseAtomicallyCreate. Defer its Cleanup: it
// removes the temporary unless one of them succeeded. It is not safe for
// concurrent use.
type PendingFile struct {
	name   string // the destination: one name of the directory
	tmp    string
	dirfd  int  // the directory, on the descriptor path
	ownDir bool // dirfd was opened here, for a path, and is closed here
	fd     int  // the temporary, on the descriptor path; -1 once closed
	rio    *renameio.PendingFile
	root   *os.Root
	cfg    config
	done   bool
}

// nextRandom makes the temporaries' names; a test plants a name first.
var nextRandom = rand.Uint64

// createFlags make a temporary that is new (O_EXCL), never a link
// (O_NOFOLLOW; with O_EXCL a link at the name fails too), never a FIFO
// waited on (O_NONBLOCK), and not inherited by a child (O_CLOEXEC).
const createFlags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// NewPendingFile makes the temporary for name: one name of the
// directory given by WithRoot or InDir, or else a path, whose directory
// is opened as the path names it. The temporary is given its mode and
// owner before anything is written into it.
func NewPendingFile(name string, opts ...Option) (*PendingFile, error) {
	p := new(PendingFile)
	if err := p.init(name, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// init is NewPendingFile's work, on a PendingFile that WriteFile keeps on
// its stack.
func (p *PendingFile) init(name string, opts []Option) error {
	c := config{dirfd: -1, perm: defaultPerm}
	for _, o := range opts {
		o(&c)
	}
	*p = PendingFile{name: name, dirfd: c.dirfd, fd: -1, root: c.root, cfg: c}
	if c.root != nil {
		return p.openRoot()
	}
	if p.dirfd < 0 {
		dir, base := filepath.Split(name)
		if dir == "" {
			dir = "."
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: dir, Err: err}
		}
		p.dirfd, p.ownDir, p.name = fd, true, base
	}
	if err := p.open(); err != nil {
		p.closeDir()
		return err
	}
	return nil
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("atomicfile: %q: want one name of the directory", name)
	}
	return nil
}

// openRoot is renameio's temporary, then the owner.
func (p *PendingFile) openRoot() error {
	if err := checkName(p.name); err != nil {
		return err
	}
	if p.cfg.noSync {
		return ErrNeedsDescriptor
	}
	rio, err := renameio.NewPendingFile(p.name, renameio.WithRoot(p.root), renameio.WithStaticPermissions(p.cfg.perm))
	if err != nil {
		return err
	}
	if p.cfg.owner {
		fi, err := rio.Stat()
		if err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			if uid, gid, ok := differs(p.cfg, st.Uid, st.Gid); ok {
				err = rio.Chown(uid, gid)
			}
		}
		if err != nil {
			rio.Cleanup()
			return err
		}
	}
	p.rio = rio
	return nil
}

// open makes the temporary in dirfd, then sets its mode and owner.
func (p *PendingFile) open() error {
	if err := checkName(p.name); err != nil {
		return err
	}
	for try := 0; ; try++ {
		var b [20]byte
		p.tmp = "." + p.name + string(strconv.AppendUint(b[:0], nextRandom(), 10))
		fd, err := unix.Openat(p.dirfd, p.tmp, createFlags, uint32(p.cfg.perm))
		if err == unix.EEXIST && try < 100 {
			continue
		}
		if err != nil {
			return err
		}
		p.fd = fd
		break
	}
	var err error
	if !p.cfg.trustUmask || !umaskKeeps(p.cfg.perm) {
		err = unix.Fchmod(p.fd, uint32(p.cfg.perm))
	}
	if p.cfg.owner && err == nil {
		var st unix.Stat_t
		if err = unix.Fstat(p.fd, &st); err == nil {
			if uid, gid, ok := differs(p.cfg, st.Uid, st.Gid); ok {
				err = unix.Fchown(p.fd, uid, gid)
			}
		}
	}
	if err != nil {
		unix.Close(p.fd)
		unix.Unlinkat(p.dirfd, p.tmp, 0)
		p.fd = -1
		return err
	}
	return nil
}

// differs says what a chown must change of a file of uid and gid to give
// it WithOwner's: -1 for what stays.
func differs(c config, uid, gid uint32) (int, int, bool) {
	u, g := c.uid, c.gid
	if u == int(uid) {
		u = -1
	}
	if g == int(gid) {
		g = -1
	}
	return u, g, u >= 0 || g >= 0
}

// Write writes b whole into the temporary.
func (p *PendingFile) Write(b []byte) (int, error) {
	if p.rio != nil {
		return p.rio.Write(b)
	}
	if p.fd < 0 {
		return 0, fs.ErrClosed
	}
	n := 0
	for n < len(b) {
		m, err := unix.Write(p.fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// closeTemp fsyncs the temporary (unless NoSync) and closes it.
func (p *PendingFile) closeTemp() error {
	var err error
	if !p.cfg.noSync {
		err = unix.Fsync(p.fd)
	}
	if cerr := unix.Close(p.fd); err == nil {
		err = cerr
	}
	p.fd = -1
	return err
}

// CloseAtomicallyReplace closes the temporary and renames it over the
// name: an open of the name finds the old file or the new one, and a
// link there is replaced, never followed. The temporary is fsync'd first
// unless NoSync; the directory after, with SyncDir.
func (p *PendingFile) CloseAtomicallyReplace() error {
	if p.rio != nil {
		if err := p.rio.CloseAtomicallyReplace(); err != nil {
			return err
		}
		p.done = true
		if p.cfg.syncDir {
			return SyncRoot(p.root)
		}
		return nil
	}
	if err := p.closeTemp(); err != nil {
		return err
	}
	if err := unix.Renameat(p.dirfd, p.tmp, p.dirfd, p.name); err != nil {
		return &os.LinkError{Op: "rename", Old: p.tmp, New: p.name, Err: err}
	}
	return p.finish()
}

// CloseAtomicallyCreate closes the temporary and moves it to the name
// only if nothing stands there, in one step (nr says how, on this
// filesystem): of two creators of one name exactly one succeeds, and the
// other gets an error wrapping fs.ErrExist and its temporary back, for
// Cleanup to remove.
func (p *PendingFile) CloseAtomicallyCreate(nr *NoReplace) error {
	if p.rio != nil {
		return ErrNeedsDescriptor
	}
	if p.fd >= 0 {
		if err := p.closeTemp(); err != nil {
			return err
		}
	}
	if err := nr.move(p.dirfd, p.tmp, p.name); err != nil {
		return err
	}
	return p.finish()
}

// finish is after the rename: the directory synced with SyncDir, and
// released if it was opened here.
func (p *PendingFile) finish() error {
	p.done = true
	var err error
	if p.cfg.syncDir {
		err = unix.Fsync(p.dirfd)
	}
	p.closeDir()
	return err
}

// SyncRoot fsyncs root's directory, so that a rename into it is durable
// (renameio syncs the file only): SyncDir's sync with WithRoot, for a
// caller that renames by itself.
func SyncRoot(root *os.Root) error {
	d, err := root.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (p *PendingFile) closeDir() {
	if p.ownDir && p.dirfd >= 0 {
		unix.Close(p.dirfd)
		p.dirfd = -1
	}
}

// Cleanup closes and removes the temporary, unless CloseAtomicallyReplace
// or CloseAtomicallyCreate succeeded: then it does nothing.
func (p *PendingFile) Cleanup() error {
	if p.done {
		return nil
	}
	if p.rio != nil {
		p.done = true
		return p.rio.Cleanup()
	}
	var err error
	if p.fd >= 0 {
		err = unix.Close(p.fd)
		p.fd = -1
	}
	if p.dirfd >= 0 {
		if uerr := unix.Unlinkat(p.dirfd, p.tmp, 0); uerr != nil && uerr != unix.ENOENT && err == nil {
			err = uerr
		}
	}
	p.closeDir()
	p.done = true
	return err
}
