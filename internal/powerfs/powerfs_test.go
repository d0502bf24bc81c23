package powerfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// mount mounts a power-losing filesystem over a fresh tmpfs (whose inode
// numbers are not reused) with the given cut, or skips.
func mount(t *testing.T, cut int, setup func(backing string)) *FS {
	t.Helper()
	backing, dir := t.TempDir(), t.TempDir()
	if err := syscall.Mount("tmpfs", backing, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs for the backing directory (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(backing, syscall.MNT_DETACH) })
	if setup != nil {
		setup(backing)
	}
	p, err := Mount(backing, dir, cut)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Unmount() })
	return p
}

func write(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
}

func syncDir(t *testing.T, path string) {
	t.Helper()
	d, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// tree reads a rebuilt tree: name -> content ("/" for a directory).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			m[rel] = "/"
			return nil
		}
		b, _ := os.ReadFile(p)
		m[rel] = string(b)
		return nil
	})
	return m
}

func crash(t *testing.T, p *FS) map[string]string {
	t.Helper()
	if err := p.Unmount(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "after")
	if err := p.Rebuild(dst); err != nil {
		t.Fatal(err)
	}
	return tree(t, dst)
}

func TestDurability(t *testing.T) {
	p := mount(t, 0, func(b string) {
		os.WriteFile(filepath.Join(b, "old"), []byte("old content"), 0o640)
		os.WriteFile(filepath.Join(b, "target"), []byte("v1"), 0o640)
		os.Mkdir(filepath.Join(b, "sub"), 0o750)
		os.WriteFile(filepath.Join(b, "sub", "moved"), []byte("m"), 0o640)
	})
	d := p.Dir
	// Named before the directory's sync, data never synced: empty.
	write(t, filepath.Join(d, "unsynced"), "x", false)
	// Data synced, then the name with the directory: whole.
	write(t, filepath.Join(d, "synced"), "y", true)
	// The atomic replace done right: new content.
	write(t, filepath.Join(d, ".tmp1"), "v2", true)
	if err := os.Rename(filepath.Join(d, ".tmp1"), filepath.Join(d, "target")); err != nil {
		t.Fatal(err)
	}
	// Rewritten in place without a sync: the old content.
	write(t, filepath.Join(d, "old"), "new content", false)
	// Name durable, data never synced: empty.
	write(t, filepath.Join(d, "empty"), "lost data", false)
	// A rename across directories, only the target synced: done on both
	// sides.
	if err := os.Rename(filepath.Join(d, "sub", "moved"), filepath.Join(d, "moved")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d)
	// After the last sync: undone.
	if err := os.Remove(filepath.Join(d, "target")); err != nil {
		t.Fatal(err)
	}
	// Created after the last sync, data synced: the name is gone.
	write(t, filepath.Join(d, "nameless"), "z", true)
	got := crash(t, p)
	want := map[string]string{"old": "old content", "target": "v2", "empty": "", "sub": "/", "moved": "m", "unsynced": "", "synced": "y"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s survived: %q", k, got[k])
		}
	}
}

func TestUnsyncedRenameUndone(t *testing.T) {
	p := mount(t, 0, func(b string) {
		os.WriteFile(filepath.Join(b, "a.ready"), nil, 0o640)
	})
	d := p.Dir
	if err := os.Rename(filepath.Join(d, "a.ready"), filepath.Join(d, "a.running")); err != nil {
		t.Fatal(err)
	}
	got := crash(t, p)
	if _, ok := got["a.ready"]; !ok || len(got) != 1 {
		t.Errorf("after an unsynced rename: %v; want a.ready alone", got)
	}
}

func TestCut(t *testing.T) {
	// Boundaries: 1 create, 2 fsync, 3 rename, 4 fsync of the directory.
	run := func(cut int) (map[string]string, []string, error) {
		p := mount(t, cut, nil)
		d := p.Dir
		var err error
		func() {
			f, e := os.OpenFile(filepath.Join(d, ".t"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
			if err = e; e != nil {
				return
			}
			defer f.Close()
			f.WriteString("doc")
			if err = f.Sync(); err != nil {
				return
			}
			if err = os.Rename(filepath.Join(d, ".t"), filepath.Join(d, "doc")); err != nil {
				return
			}
			dd, e := os.Open(d)
			if err = e; e != nil {
				return
			}
			defer dd.Close()
			err = dd.Sync()
		}()
		ops := p.Ops()
		return crash(t, p), ops, err
	}
	full, ops, err := run(0)
	if err != nil || full["doc"] != "doc" {
		t.Fatalf("uncut: %v %v", full, err)
	}
	if len(ops) != 4 {
		t.Fatalf("boundaries %q; want 4", ops)
	}
	for cut := 1; cut <= 4; cut++ {
		got, ops, err := run(cut)
		if err == nil || !errors.Is(err, syscall.EIO) {
			t.Errorf("cut %d: the workload saw %v, want EIO", cut, err)
		}
		if len(ops) != cut {
			t.Errorf("cut %d: ops %q", cut, ops)
		}
		if len(got) != 0 {
			t.Errorf("cut %d: %v survived; nothing was durable before the directory's sync", cut, got)
		}
	}
	if !slices.Contains(ops, "3 rename .t doc") {
		t.Errorf("ops %q", ops)
	}
}

// Cut at a moment of the test's own: what was durable stays, and every
// operation after fails.
func TestCutNow(t *testing.T) {
	p := mount(t, 0, nil)
	d := p.Dir
	write(t, filepath.Join(d, "kept"), "kept", true)
	syncDir(t, d)
	p.Cut()
	if !p.Dead() {
		t.Fatal("not dead after Cut")
	}
	if err := os.WriteFile(filepath.Join(d, "lost"), []byte("lost"), 0o640); !errors.Is(err, syscall.EIO) {
		t.Errorf("a create after the cut: %v, want EIO", err)
	}
	if got := crash(t, p); len(got) != 1 || got["kept"] != "kept" {
		t.Errorf("after the cut: %v; want kept alone", got)
	}
}
