package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// where is one way of naming the directory: a descriptor, an os.Root, or
// a path.
type where struct {
	name string
	opts func(t *testing.T, dir string) []Option
	path func(dir, name string) string
}

var wheres = []where{
	{"InDir", func(t *testing.T, dir string) []Option {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return []Option{InDir(fd)}
	}, func(_, name string) string { return name }},
	{"WithRoot", func(t *testing.T, dir string) []Option {
		r, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return []Option{WithRoot(r)}
	}, func(_, name string) string { return name }},
	{"path", func(*testing.T, string) []Option { return nil }, func(dir, name string) string { return filepath.Join(dir, name) }},
}

// temporaries lists what a write left behind.
func temporaries(t *testing.T, dir string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, ".*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// Every way of naming the directory writes the content with the mode
// asked, whatever the umask, and leaves no temporary.
func TestWriteFileMode(t *testing.T) {
	for _, w := range wheres {
		for _, c := range []struct {
			umask int
			perm  os.FileMode
		}{{0, 0o640}, {0o077, 0o640}, {0o022, 0o644}, {0o027, 0o600}} {
			t.Run(w.name, func(t *testing.T) {
				old := syscall.Umask(c.umask)
				defer syscall.Umask(old)
				dir := t.TempDir()
				if err := WriteFile(w.path(dir, "doc"), []byte("one\n"), append(w.opts(t, dir), WithMode(c.perm))...); err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(filepath.Join(dir, "doc"))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(filepath.Join(dir, "doc"))
				if fi.Mode() != c.perm || string(b) != "one\n" {
					t.Errorf("umask %03o: %v %q; want %v \"one\\n\"", c.umask, fi.Mode(), b, c.perm)
				}
				if left := temporaries(t, dir); len(left) > 0 {
					t.Errorf("temporaries left: %v", left)
				}
			})
		}
	}
}

// A symlink at the name is replaced, never written through; and a link
// planted at the temporary's name (as an attacker who guessed it would)
// is neither followed nor removed: another name is drawn.
func TestWriteFileLinks(t *testing.T) {
	for _, w := range wheres {
		t.Run(w.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			victim := filepath.Join(outside, "victim")
			if err := os.WriteFile(victim, []byte("mine\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Symlink(victim, filepath.Join(dir, "doc"))
			draws := []uint64{7, 7, 8}
			defer func(old func() uint64) { nextRandom = old }(nextRandom)
			if w.name != "WithRoot" { // renameio draws its own names
				nextRandom = func() uint64 { d := draws[0]; draws = draws[1:]; return d }
				os.Symlink(victim, filepath.Join(dir, ".doc7"))
			}
			for i := 0; i < 2; i++ {
				if err := WriteFile(w.path(dir, "doc"), []byte("new\n"), append(w.opts(t, dir), WithMode(0o644))...); err != nil {
					t.Fatal(err)
				}
				if w.name != "WithRoot" {
					draws = []uint64{7, 8}
				}
			}
			if fi, err := os.Lstat(filepath.Join(dir, "doc")); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("the name: %v %v; want the new file in place of the link", fi, err)
			}
			fi, _ := os.Stat(victim)
			if b, _ := os.ReadFile(victim); string(b) != "mine\n" || fi.Mode().Perm() != 0o600 {
				t.Errorf("the link's target is now %q, %v", b, fi.Mode())
			}
			if w.name != "WithRoot" {
				if fi, err := os.Lstat(filepath.Join(dir, ".doc7")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("the planted link: %v %v", fi, err)
				}
			}
		})
	}
}

// A name that is not one name of the directory is refused before
// anything is made.
func TestOneName(t *testing.T) {
	for _, w := range wheres[:2] {
		for _, name := range []string{"a/b", "", ".", ".."} {
			dir := t.TempDir()
			os.Mkdir(filepath.Join(dir, "a"), 0o755)
			if err := WriteFile(name, nil, w.opts(t, dir)...); err == nil {
				t.Errorf("%s: %q accepted", w.name, name)
			}
		}
	}
}

// CreateFile never replaces: over a file, a link or a directory it fails
// with fs.ErrExist and leaves what was there and no temporary; a free name
// it creates. In each way NoReplace may work.
func TestCreateFile(t *testing.T) {
	for _, way := range []Way{RenameNoReplace, Link, CheckThenRename} {
		dir := t.TempDir()
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		os.WriteFile(filepath.Join(dir, "file"), []byte("first\n"), 0o644)
		os.Symlink("nowhere", filepath.Join(dir, "link"))
		os.Mkdir(filepath.Join(dir, "dir"), 0o755)
		var nr NoReplace
		nr.Set(way)
		for _, name := range []string{"file", "link", "dir"} {
			if err := CreateFile(name, []byte("second\n"), &nr, InDir(fd)); !errors.Is(err, fs.ErrExist) {
				t.Errorf("way %d: over %s: %v; want it exists", way, name, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "file")); string(b) != "first\n" {
			t.Errorf("way %d: the file is now %q", way, b)
		}
		if err := CreateFile("free", []byte("second\n"), &nr, InDir(fd), SyncDir()); err != nil || nr.Way() != way {
			t.Errorf("way %d: a free name: %v (way now %d)", way, err, nr.Way())
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "free")); string(b) != "second\n" {
			t.Errorf("way %d: the new file is %q", way, b)
		}
		if left := temporaries(t, dir); len(left) > 0 {
			t.Errorf("way %d: temporaries left: %v", way, left)
		}
	}
}

// What renameio cannot do is refused with a root, not done otherwise.
func TestRootNeedsDescriptor(t *testing.T) {
	r, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := WriteFile("x", nil, WithRoot(r), NoSync()); !errors.Is(err, ErrNeedsDescriptor) {
		t.Errorf("NoSync with a root: %v", err)
	}
	if err := CreateFile("x", nil, nil, WithRoot(r)); !errors.Is(err, ErrNeedsDescriptor) {
		t.Errorf("CreateFile with a root: %v", err)
	}
	if ents, _ := os.ReadDir(r.Name()); len(ents) != 0 {
		t.Errorf("left: %v", ents)
	}
}

// A pending file given up (an error while writing, say) leaves nothing.
func TestCleanup(t *testing.T) {
	for _, w := range wheres {
		dir := t.TempDir()
		p, err := NewPendingFile(w.path(dir, "doc"), w.opts(t, dir)...)
		if err != nil {
			t.Fatal(err)
		}
		p.Write([]byte("half"))
		if err := p.Cleanup(); err != nil {
			t.Errorf("%s: %v", w.name, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: left %v", w.name, ents)
		}
	}
}

// WithOwner gives the file its owner through the descriptor (root only:
// nobody else may give a file away).
func TestWithOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root gives a file to another user (CI runs as root)")
	}
	const uid, gid = 65534, 65533
	for _, w := range wheres {
		dir := t.TempDir()
		if err := WriteFile(w.path(dir, "doc"), []byte("x"), append(w.opts(t, dir), WithOwner(uid, gid), TrustUmask())...); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(dir, "doc"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s: owned by %d:%d; want %d:%d", w.name, st.Uid, st.Gid, uid, gid)
		}
	}
}

// A write that fails (here: into a directory that is gone) says so, and
// a failed CloseAtomicallyReplace leaves the temporary to Cleanup.
func TestErrorsSaid(t *testing.T) {
	dir := t.TempDir()
	err := WriteFile(filepath.Join(dir, "missing", "doc"), nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("into a missing directory: %v", err)
	}
}
