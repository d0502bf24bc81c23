package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Subdir is a subdirectory of the tree held open (gate/in, say), for a
// daemon that keeps working in it: every operation goes through the handle
// taken when it was opened, so a symlink swapped in at its name later
// leads nowhere. A Subdir is safe for concurrent use; Close releases it.
type Subdir struct {
	Name string // its name in the tree, for messages
	s    *Spool
	root *os.Root
	f    *os.File // the directory itself, for fsync and renameat
}

// OpenSubdir opens the directory name of the tree, making it (and any missing
// parent in the tree) if missing. A symlink, or anything but a directory,
// in its place is refused. Its mode is set to mode through its own
// descriptor, never by path, when it differs.
func (s *Spool) OpenSubdir(name string, mode os.FileMode) (*Subdir, error) {
	return s.OpenSubdirGroup(name, mode, -1)
}

// OpenSubdirGroup is OpenSubdir that also gives the directory the group
// gid (through its descriptor, before its mode is set, so that the mode
// never opens it to the group it had), unless gid is negative. A
// directory it makes is made 0700 first, for the same reason. Only root,
// or an owner who is a member of gid, may do so.
func (s *Spool) OpenSubdirGroup(name string, mode os.FileMode, gid int) (*Subdir, error) {
	fail := func(err error) (*Subdir, error) { return nil, fmt.Errorf("spool %s: %w", s.Path(name), err) }
	refused := func(fi fs.FileInfo) (*Subdir, error) {
		return fail(fmt.Errorf("%w (%s, not a directory; a symlink is refused)", ErrNotRegular, kind(fi)))
	}
	if fi, err := s.root.Lstat(name); err == nil && !fi.IsDir() {
		return refused(fi)
	}
	mkmode := mode
	if gid >= 0 {
		mkmode &= 0o700
	}
	if err := s.root.MkdirAll(name, mkmode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fail(err)
	}
	f, err := openDir(s.root, name)
	if err != nil {
		if lfi, lerr := s.root.Lstat(name); lerr == nil && !lfi.IsDir() {
			return refused(lfi)
		}
		return fail(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fail(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && gid >= 0 && st.Gid != uint32(gid) {
		if err := f.Chown(-1, gid); err != nil {
			f.Close()
			return fail(fmt.Errorf("cannot give it group %d: %w", gid, err))
		}
	}
	if fi.Mode().Perm() != mode.Perm() {
		// MkdirAll obeys the umask; the modes are part of the layout.
		if err := f.Chmod(mode.Perm()); err != nil {
			f.Close()
			return fail(err)
		}
	}
	r, err := s.root.OpenRoot(name)
	if err != nil {
		f.Close()
		return fail(err)
	}
	// What was opened as a root must be what was checked.
	if rfi, err := r.Stat("."); err != nil || !os.SameFile(fi, rfi) {
		r.Close()
		f.Close()
		return fail(errors.New("replaced while being opened"))
	}
	return &Subdir{Name: name, s: s, root: r, f: f}, nil
}

// Path returns the host path of a name of the directory, for messages.
func (d *Subdir) Path(name string) string { return d.s.Path(d.Name + "/" + name) }

// Close releases the directory.
func (d *Subdir) Close() error {
	d.root.Close()
	return d.f.Close()
}

// Entries lists the directory.
func (d *Subdir) Entries() ([]fs.DirEntry, error) {
	f, err := openDir(d.root, ".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// Lstat describes name, never what a symlink there points to.
func (d *Subdir) Lstat(name string) (fs.FileInfo, error) { return d.root.Lstat(name) }

// Read reads name if it is a plain file of at most max bytes: opened
// without following a link and without blocking on a FIFO, then checked
// by fstat, so that nothing swapped in between a check and the read is
// read. It wraps ErrNotRegular or ErrTooLarge when it is not one, and
// ErrUntrusted when its owner is one the Spool does not trust
// (TrustOwners, TrustMembers): the file read is the file whose owner was
// checked.
func (d *Subdir) Read(name string, max int64) ([]byte, error) {
	b, fi, err := readFile(d.root, name, max)
	if err != nil {
		return nil, err
	}
	if err := d.s.CheckOwner(d.Name+"/"+name, fi); err != nil {
		return nil, err
	}
	return b, nil
}

// Stat describes the directory itself, through its handle.
func (d *Subdir) Stat() (fs.FileInfo, error) { return d.f.Stat() }

// Write replaces name atomically and durably with data (mode FileMode).
func (d *Subdir) Write(name string, data []byte) error { return writeFile(d.root, name, data) }

// Create opens name for writing, truncated (made if missing), never
// through a link, for a log a process writes into. A file with another
// link is refused rather than truncated: it may be one outside the tree.
func (d *Subdir) Create(name string) (*os.File, error) {
	f, fi, err := openRegular(d.root, name, os.O_CREATE|os.O_WRONLY)
	if err != nil {
		if errors.Is(err, ErrNotRegular) {
			return nil, fmt.Errorf("%s: %w", d.Path(name), ErrNotRegular)
		}
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		f.Close()
		return nil, fmt.Errorf("%s: %w (a file with %d links)", d.Path(name), ErrNotRegular, st.Nlink)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Remove removes name (never a symlink's target); a missing name is not
// an error.
func (d *Subdir) Remove(name string) error { return removeName(d.root, name) }

// MoveTo renames name into the directory to as newname, through both held
// handles (renameat), and makes the move durable (to is fsync'd).
func (d *Subdir) MoveTo(name string, to *Subdir, newname string) error {
	if err := unix.Renameat(int(d.f.Fd()), name, int(to.f.Fd()), newname); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Path(name), New: to.Path(newname), Err: err}
	}
	return to.f.Sync()
}

// WriteAdvisory replaces name atomically with data (mode FileMode), not
// synced: for files a power cut may take back (a metrics textfile), never
// for a document a promise rests on.
func (d *Subdir) WriteAdvisory(name string, data []byte) error {
	return writeAdvisory(int(d.f.Fd()), name, data)
}
