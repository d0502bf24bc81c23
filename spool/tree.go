package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/internal/atomicfile"
)

// Modes of the tree. They are set explicitly, whatever the umask, so that
// only the spool's group can read a person's answers.
const (
	DirMode  os.FileMode = 0o750
	FileMode os.FileMode = 0o640
)

// Subdirectories of the root.
const (
	ProgressDir = "progress"
	ChatsDir    = "chats"
	CorruptDir  = "corrupt"
	GateDir     = "gate"
)

// Size limits of what is read: a document larger than this is not a
// document but an attack or an accident, and is refused rather than read.
const (
	MaxDocument = 4 << 20  // spec, lease, result, answer
	MaxProgress = 16 << 20 // 64 events of up to MaxEventText each, and then some
)

var (
	// ErrNotRegular is wrapped when a name of the tree is a symlink, a
	// directory, a FIFO or anything but a plain file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is wrapped when a document exceeds its size limit.
	ErrTooLarge = errors.New("too large")
	// ErrCorrupt is wrapped when a document does not parse as its name says.
	ErrCorrupt = errors.New("does not parse")
	// ErrNoSpool is wrapped when the spool directory does not exist.
	ErrNoSpool = errors.New("no such spool directory")
)

// Spool is an open spool tree. Every file operation goes through an
// os.Root, so that no symlink can take a read or a write outside the tree.
// A Spool is safe for concurrent use.
type Spool struct {
	// RootPath is the host path of the spool's root directory, as it was
	// opened: for messages, and for what must be named by path (a
	// filesystem's statfs, a cgroup's name).
	RootPath string
	// Floor, if not zero, is the free space below which Submit refuses a
	// new job (ErrBelowFloor). Set it before the Spool is shared.
	Floor Floor
	root  *os.Root
	// dir is the root directory itself, held open from Open: its
	// descriptor is what take, the submits' renames and syncs, and
	// CheckRootSafe work on.
	dir *os.File
	// taking is how a name is taken without replacing what stands there
	// on this filesystem (a spec's id, take.go).
	taking atomicfile.NoReplace

	// progress/ stays open between flushes (a flush is the hot path):
	// prog is that directory, progID what an fstat of it said. Every use
	// first lstats progress/ and reopens it if another inode (or a
	// symlink) stands there now. pmu is held for reading while prog is
	// used, and for writing while it is replaced or closed.
	pmu    sync.RWMutex
	prog   *os.File
	progID fs.FileInfo

	// owners are the uids whose specs and markers are trusted (TrustOwners);
	// empty: any.
	owners []uint32
	// members is a group whose members are trusted too (TrustMembers).
	members *trustedGroup

	// clockOffset moves the times this Spool writes (SetClockOffset).
	clockOffset time.Duration
}

// Open opens an existing spool without creating anything: the commands that
// only read or submit use it, so that a typo in --spool is an error rather
// than a new empty spool.
func Open(dir string) (*Spool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("spool %s: %w: %s", dir, ErrNoSpool, missingAdvice(dir))
		}
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("spool %s: not a directory", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("spool %s: %w: %s", dir, err, closedAdvice(dir))
		}
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	d, err := openDir(r, ".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	return &Spool{RootPath: dir, root: r, dir: d}, nil
}

// dirfd is the descriptor of the root directory held open.
func (s *Spool) dirfd() int { return int(s.dir.Fd()) }

// Create makes the tree (mode 0750 directories) if it is missing, then opens
// it. Daemons use it at start.
func Create(dir string) (*Spool, error) {
	_, serr := os.Lstat(dir)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("spool %s: cannot create: %w", dir, err)
	}
	if errors.Is(serr, fs.ErrNotExist) {
		// MkdirAll obeys the umask; a root we made gets the tree's mode.
		if err := os.Chmod(dir, DirMode); err != nil {
			return nil, fmt.Errorf("spool %s: %w", dir, err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{ProgressDir, ChatsDir, CorruptDir, GateDir, DoorbellDir} {
		if err := s.mkdir(d); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the spool's directory handles.
func (s *Spool) Close() error {
	s.pmu.Lock()
	if s.prog != nil {
		s.prog.Close()
		s.prog, s.progID = nil, nil
	}
	s.pmu.Unlock()
	s.dir.Close()
	return s.root.Close()
}

// Path returns the host path of a name of the tree, for messages and for
// handing to processes.
func (s *Spool) Path(name string) string { return filepath.Join(s.RootPath, name) }

func (s *Spool) mkdir(name string) error {
	err := s.root.Mkdir(name, DirMode)
	if err == nil {
		// Mkdir obeys the umask; the tree's mode does not.
		if err := s.root.Chmod(name, DirMode); err != nil {
			return fmt.Errorf("spool %s: %w", s.Path(name), err)
		}
		// Root's directory takes its parent's owner, as root's files
		// do (settle): the service user's daemons write in it.
		if euid == 0 {
			if pfi, err := s.root.Lstat(path.Dir(name)); err == nil {
				if st, ok := pfi.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 || st.Gid != 0) {
					s.root.Lchown(name, int(st.Uid), int(st.Gid))
				}
			}
		}
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := s.root.Lstat(name)
		if lerr == nil && fi.IsDir() {
			return nil
		}
		return fmt.Errorf("spool %s: exists and is not a directory", s.Path(name))
	}
	return fmt.Errorf("spool %s: cannot create: %w", s.Path(name), err)
}

// subRoot opens the directory dir of the tree (creating it if create),
// refusing a symlink in its place.
func (s *Spool) subRoot(dir string, create bool) (*os.Root, error) {
	if create {
		if err := s.mkdir(dir); err != nil {
			return nil, err
		}
	}
	fi, err := s.root.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w (want a directory)", s.Path(dir), ErrNotRegular)
	}
	return s.root.OpenRoot(dir)
}

// writeFile replaces name in dir atomically and durably: a reader sees the
// old content or the new, never a part, and the new content and its name
// survive a power loss (the file, then the directory, fsync'd). It is
// renameio's write, through the os.Root (internal/atomicfile), with the
// tree's mode and, when root writes, the directory's owner.
func writeFile(dir *os.Root, name string, data []byte) error {
	return atomicfile.WriteFile(name, data, treeOpts(rootOwner(dir), atomicfile.WithRoot(dir), atomicfile.SyncDir())...)
}

// writeSynced is writeFile without the directory's fsync: the new content
// is durable, and its name as durable as the directory's next sync makes
// it. For a rewrite where either version a power cut leaves is a valid
// one, as long as it reads whole (a lease's ending, spool.End; its
// process group, UpdateLease).
func writeSynced(dir *os.Root, name string, data []byte) error {
	return atomicfile.WriteFile(name, data, treeOpts(rootOwner(dir), atomicfile.WithRoot(dir))...)
}

// writeAdvisory replaces name in the directory dirfd atomically, without
// an fsync: for documents a power cut may take back (progress, whose
// flushes are the hot path; a metrics textfile). Never for a document
// that exists durably already and must read whole after a cut: the
// rename may become durable by another write's sync of the directory
// while the data is not, and the name reads back empty.
func writeAdvisory(dirfd int, name string, data []byte) error {
	return writeAt(name, data, nil, treeOpts(dirOwner(dirfd), atomicfile.InDir(dirfd), atomicfile.NoSync()))
}

// writeAt writes data to name atomically, by system calls on the
// descriptor opts name (treeOpts with atomicfile.InDir): over what stands
// at name, or, with nr, only if nothing does (an error wrapping
// fs.ErrExist then, and nothing left behind). The file is fsync'd unless
// opts say NoSync; the directory is the caller's to sync.
func writeAt(name string, data []byte, nr *atomicfile.NoReplace, opts []atomicfile.Option) error {
	if nr != nil {
		return atomicfile.CreateFile(name, data, nr, opts...)
	}
	return atomicfile.WriteFile(name, data, opts...)
}

// treeOpts are the options of every write of the tree: the tree's mode,
// the owner root's files take (own: dirOwner, rootOwner), then more
// (where: WithRoot or InDir; the syncs). A batch builds them once.
func treeOpts(own owner, more ...atomicfile.Option) []atomicfile.Option {
	opts := make([]atomicfile.Option, 0, 2+len(more))
	opts = append(opts, atomicfile.WithMode(FileMode))
	if own.set {
		opts = append(opts, atomicfile.WithOwner(own.uid, own.gid))
	}
	return append(opts, more...)
}

// syncDir fsyncs a directory, so that a rename into it is durable: the
// atomic write's own directory sync (O_DIRECTORY|O_NOFOLLOW).
func syncDir(dir *os.Root) error { return atomicfile.SyncRoot(dir) }

// readFile reads a whole document, refusing anything but a plain file and
// anything larger than max.
func readFile(dir *os.Root, name string, max int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := openRegular(dir, name, os.O_RDONLY)
	if err != nil {
		return nil, fi, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fi, fmt.Errorf("%s: %w (%d bytes, limit %d)", name, ErrTooLarge, fi.Size(), max)
	}
	// A document is replaced, never appended to: the size fstat gave is
	// all there is, and one read takes it.
	b := make([]byte, fi.Size())
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fi, err
	}
	return b[:n], fi, nil
}

// removeName removes a name of the tree, never what a symlink there points
// to; a name that is already gone is not an error. A directory in its place
// is refused.
func removeName(dir *os.Root, name string) error {
	fi, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory, not a document; move it aside by hand", name)
	}
	if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Stat returns the info of a name of the root, without following a link.
func (s *Spool) Stat(name string) (os.FileInfo, error) { return s.root.Lstat(name) }

// Remove removes a name of the tree (never a symlink's target). A missing
// name is not an error.
func (s *Spool) Remove(name string) error { return removeName(s.root, name) }
