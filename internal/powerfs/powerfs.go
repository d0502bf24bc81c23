// Package powerfs is a filesystem that can lose power, for tests: a FUSE
// loopback over a backing directory that remembers, for every file and
// directory, what has been made durable, so that a test can cut the power
// at a chosen point and "reboot" onto what a disk would still hold.
//
// What counts as durable is the harshest reasonable reading of POSIX, the
// one a crash-safe program must survive (docs/reliability.md):
//
//   - A file's data is durable as of its last fsync or fdatasync. A file
//     whose data was never synced since it was created reads back empty;
//     one rewritten since its last sync reads back as it was then.
//   - A directory's entries (create, rename, unlink, mkdir, link, symlink)
//     are durable as of the last fsync of that directory. A name created
//     and not synced is gone; a name removed and not synced is back.
//   - A rename from one directory to another is one journal transaction,
//     as on the common journaling filesystems: it becomes durable, on both
//     sides, when either directory is synced after it. (Within one
//     directory it is durable when that directory is.)
//   - Everything the backing directory held when it was mounted is
//     durable.
//
// Not modelled: syncfs(2), sync(2) and O_SYNC reach a FUSE filesystem as
// nothing (the kernel does not pass syncfs to a server that does not
// answer it, and go-fuse does not), so a program must fsync what it needs
// durable; timestamps other than a durable file's mtime; extended
// attributes.
//
// The cut: every operation that changes the tree or makes it durable (a
// boundary: create, mkdir, rename, unlink, rmdir, link, symlink, truncate,
// fsync) is counted from 1. With Cut set to k, boundary k and every
// operation after it fail with EIO, as if the machine had died just
// before it: nothing after it reaches the backing directory or the
// durable state. Ops lists the boundaries of a run, for choosing cuts and
// for a failure's report.
package powerfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// entry is a directory entry as made durable.
type entry struct {
	ino    uint64
	mode   fs.FileMode // type and permissions
	target string      // a symlink's
}

// file is a file's durable data.
type file struct {
	data  []byte
	mode  fs.FileMode
	mtime time.Time
}

// FS is a mounted filesystem that can lose power. Its methods are safe
// for concurrent use.
type FS struct {
	// Dir is where it is mounted.
	Dir string
	// Backing is the directory it passes through to.
	Backing string

	server *fuse.Server

	mu    sync.Mutex
	cut   int // the boundary that fails first; 0: none
	n     int // boundaries so far
	dead  bool
	ops   []string
	files map[uint64]file             // by backing inode
	dirs  map[uint64]map[string]entry // by backing inode
	root  uint64
}

// ErrUnsupported says that FUSE cannot be mounted here (not root, no
// /dev/fuse): a test skips.
var ErrUnsupported = errors.New("powerfs: FUSE cannot be mounted here")

// Mount mounts a power-losing view of backing at dir. cut is the first
// boundary to fail (0: none).
func Mount(backing, dir string, cut int) (*FS, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root", ErrUnsupported)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	p := &FS{Dir: dir, Backing: backing, cut: cut, files: map[uint64]file{}, dirs: map[uint64]map[string]entry{}}
	if err := p.snapshotAll(); err != nil {
		return nil, err
	}
	root := &gofs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *gofs.LoopbackRoot, parent *gofs.Inode, name string, st *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, p: p}
	}
	rn := &node{LoopbackNode: gofs.LoopbackNode{RootData: root}, p: p}
	root.RootNode = rn
	zero := time.Duration(0)
	srv, err := gofs.Mount(dir, rn, &gofs.Options{
		// No caching in the kernel: every operation reaches the model.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			AllowOther: true, FsName: "powerfs", Name: "powerfs",
			DirectMountStrict: true, DisableXAttrs: true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	p.server = srv
	return p, nil
}

// Unmount unmounts the filesystem (lazily if it is still in use: the
// processes using it must be gone for its server to stop).
func (p *FS) Unmount() error {
	if err := p.server.Unmount(); err != nil {
		if uerr := syscall.Unmount(p.Dir, syscall.MNT_DETACH); uerr != nil {
			return fmt.Errorf("powerfs: unmount %s: %v (and lazily: %v)", p.Dir, err, uerr)
		}
	}
	return nil
}

// Boundaries is how many boundaries the run has passed (the cut's
// included).
func (p *FS) Boundaries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Dead says whether the power has been cut.
func (p *FS) Dead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// Cut cuts the power now, as a cut set at Mount does at its boundary:
// every operation from here on fails. For a test whose point of failure
// is a moment of its own rather than a count of boundaries.
func (p *FS) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
}

// Ops lists the boundaries passed, "n op path...", the cut's last.
func (p *FS) Ops() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ops...)
}

// boundary counts an operation; false: the power is cut (at it, or
// before) and it must fail.
func (p *FS) boundary(op string, names ...string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return false
	}
	p.n++
	desc := fmt.Sprintf("%d %s", p.n, op)
	for _, n := range names {
		desc += " " + n
	}
	p.ops = append(p.ops, desc)
	if p.cut > 0 && p.n >= p.cut {
		p.dead = true
		return false
	}
	return true
}

func (p *FS) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead
}

// rel is a backing path's name in the filesystem, for Ops.
func (p *FS) rel(path string) string {
	r, err := filepath.Rel(p.Backing, path)
	if err != nil {
		return path
	}
	return r
}

// snapshotAll makes the whole backing tree durable (at mount).
func (p *FS) snapshotAll() error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p.Backing, &st); err != nil {
		return err
	}
	p.root = st.Ino
	return filepath.WalkDir(p.Backing, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		switch {
		case d.IsDir():
			l, err := listDir(path)
			if err != nil {
				return err
			}
			p.dirs[st.Ino] = l
		case d.Type().IsRegular():
			return p.snapshotFile(path)
		}
		return nil
	})
}

// snapshotFile makes the file at path durable as it is now. Called with
// p.mu held, or before the mount.
func (p *FS) snapshotFile(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p.files[st.Ino] = file{data: data, mode: fs.FileMode(st.Mode & 0o7777), mtime: time.Unix(st.Mtim.Unix())}
	return nil
}

// listDir reads a backing directory's entries.
func listDir(path string) (map[string]entry, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	m := make(map[string]entry, len(ents))
	for _, e := range ents {
		var st syscall.Stat_t
		full := filepath.Join(path, e.Name())
		if err := syscall.Lstat(full, &st); err != nil {
			continue // gone since the listing
		}
		en := entry{ino: st.Ino, mode: fileMode(st.Mode)}
		if en.mode&fs.ModeSymlink != 0 {
			en.target, _ = os.Readlink(full)
		}
		m[e.Name()] = en
	}
	return m, nil
}

func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	return mode
}

// syncDir makes the directory at path durable as it is now, and with it
// the other side of every rename that moved a name in or out of it.
// Called with p.mu held.
func (p *FS) syncDir(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return err
	}
	now, err := listDir(path)
	if err != nil {
		return err
	}
	before := p.dirs[st.Ino]
	p.dirs[st.Ino] = now
	left, arrived := map[uint64]bool{}, map[uint64]bool{}
	for name, e := range before {
		if cur, ok := now[name]; !ok || cur.ino != e.ino {
			left[e.ino] = true
		}
	}
	for name, e := range now {
		if old, ok := before[name]; !ok || old.ino != e.ino {
			arrived[e.ino] = true
		}
	}
	if len(left) == 0 && len(arrived) == 0 {
		return nil
	}
	// Where each inode is now, in the other directories.
	type place struct {
		dir  uint64
		name string
		e    entry
	}
	where := map[uint64][]place{}
	current := map[uint64]map[string]entry{}
	filepath.WalkDir(p.Backing, func(q string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		var dst syscall.Stat_t
		if syscall.Lstat(q, &dst) != nil || dst.Ino == st.Ino {
			return nil
		}
		l, _ := listDir(q)
		current[dst.Ino] = l
		for name, e := range l {
			where[e.ino] = append(where[e.ino], place{dst.Ino, name, e})
		}
		return nil
	})
	// Moved out of this directory into another: durable there too.
	for ino := range left {
		for _, w := range where[ino] {
			if l := p.dirs[w.dir]; l != nil && l[w.name].ino != ino {
				l[w.name] = w.e
			}
		}
	}
	// Moved into this directory from another: gone from there too.
	for dino, l := range p.dirs {
		if dino == st.Ino {
			continue
		}
		for name, e := range l {
			if arrived[e.ino] && current[dino][name].ino != e.ino {
				delete(l, name)
			}
		}
	}
	return nil
}

// Rebuild writes the durable tree into dst (which must not exist): what a
// disk would hold after the power was cut.
func (p *FS) Rebuild(dst string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := os.Stat(p.Backing)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, st.Mode().Perm()); err != nil {
		return err
	}
	return p.rebuildDir(p.root, dst, 0)
}

func (p *FS) rebuildDir(ino uint64, dst string, depth int) error {
	if depth > 64 {
		return errors.New("powerfs: directories nest too deep (a loop?)")
	}
	l := p.dirs[ino]
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := l[name]
		path := filepath.Join(dst, name)
		switch {
		case e.mode.IsDir():
			if err := os.Mkdir(path, e.mode.Perm()); err != nil {
				return err
			}
			if err := p.rebuildDir(e.ino, path, depth+1); err != nil {
				return err
			}
			os.Chmod(path, e.mode.Perm())
		case e.mode&fs.ModeSymlink != 0:
			if err := os.Symlink(e.target, path); err != nil {
				return err
			}
		case e.mode.IsRegular():
			f, ok := p.files[e.ino]
			mode := e.mode.Perm()
			if ok {
				mode = f.mode.Perm()
			}
			if err := os.WriteFile(path, f.data, mode); err != nil {
				return err
			}
			os.Chmod(path, mode)
			if ok {
				os.Chtimes(path, f.mtime, f.mtime)
			}
		case e.mode&fs.ModeNamedPipe != 0:
			if err := syscall.Mkfifo(path, uint32(e.mode.Perm())); err != nil {
				return err
			}
		}
	}
	return nil
}

// node is a loopback node whose operations pass the cut and keep the
// durable state.
type node struct {
	gofs.LoopbackNode
	p *FS
}

func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

func (n *node) child(name string) string { return filepath.Join(n.path(), name) }

var eio = syscall.EIO

var (
	_ gofs.NodeLookuper       = (*node)(nil)
	_ gofs.NodeCreater        = (*node)(nil)
	_ gofs.NodeMkdirer        = (*node)(nil)
	_ gofs.NodeUnlinker       = (*node)(nil)
	_ gofs.NodeRmdirer        = (*node)(nil)
	_ gofs.NodeRenamer        = (*node)(nil)
	_ gofs.NodeLinker         = (*node)(nil)
	_ gofs.NodeSymlinker      = (*node)(nil)
	_ gofs.NodeSetattrer      = (*node)(nil)
	_ gofs.NodeFsyncer        = (*node)(nil)
	_ gofs.NodeWriter         = (*node)(nil)
	_ gofs.NodeOpener         = (*node)(nil)
	_ gofs.NodeOpendirHandler = (*node)(nil)
	_ gofs.NodeGetattrer      = (*node)(nil)
	_ gofs.NodeMknoder        = (*node)(nil)
	_ gofs.NodeCopyFileRanger = (*node)(nil)
	_ gofs.NodeAllocater      = (*node)(nil)
	_ gofs.NodeReadlinker     = (*node)(nil)
	_ gofs.NodeStatfser       = (*node)(nil)
	_ gofs.NodeGetxattrer     = (*node)(nil)
	_ gofs.NodeFlusher        = (*node)(nil)
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.p.alive() {
		return nil, eio
	}
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !n.p.alive() {
		return eio
	}
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		if !n.p.boundary("truncate", n.p.rel(n.path())) {
			return nil, 0, eio
		}
	} else if !n.p.alive() {
		return nil, 0, eio
	}
	return n.LoopbackNode.Open(ctx, flags)
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if !n.p.boundary("create", n.p.rel(n.child(name))) {
		return nil, nil, 0, eio
	}
	return n.LoopbackNode.Create(ctx, name, flags, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.p.boundary("mknod", n.p.rel(n.child(name))) {
		return nil, eio
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.p.boundary("mkdir", n.p.rel(n.child(name))) {
		return nil, eio
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if !n.p.boundary("unlink", n.p.rel(n.child(name))) {
		return eio
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if !n.p.boundary("rmdir", n.p.rel(n.child(name))) {
		return eio
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to := filepath.Join(n.RootData.Path, newParent.EmbeddedInode().Path(n.Root()), newName)
	if !n.p.boundary("rename", n.p.rel(n.child(name)), n.p.rel(to)) {
		return eio
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.p.boundary("link", n.p.rel(n.child(name))) {
		return nil, eio
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.p.boundary("symlink", n.p.rel(n.child(name))) {
		return nil, eio
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); ok {
		if !n.p.boundary("truncate", n.p.rel(n.path())) {
			return eio
		}
	} else if !n.p.alive() {
		return eio
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

func (n *node) Write(ctx context.Context, f gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if !n.p.alive() {
		return 0, eio
	}
	w, ok := f.(gofs.FileWriter)
	if !ok {
		return 0, syscall.EBADF
	}
	return w.Write(ctx, data, off)
}

func (n *node) Flush(ctx context.Context, f gofs.FileHandle) syscall.Errno {
	if fl, ok := f.(gofs.FileFlusher); ok {
		return fl.Flush(ctx)
	}
	return 0
}

func (n *node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

func (n *node) Allocate(ctx context.Context, f gofs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.ENOTSUP
}

// Fsync makes the file (or, through a directory handle, the directory)
// durable as it is now.
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	path := n.path()
	if !n.p.boundary("fsync", n.p.rel(path)) {
		return eio
	}
	if fs, ok := f.(gofs.FileFsyncer); ok {
		if errno := fs.Fsync(ctx, flags); errno != 0 {
			return errno
		}
	}
	n.p.mu.Lock()
	defer n.p.mu.Unlock()
	var err error
	if n.IsDir() {
		err = n.p.syncDir(path)
	} else {
		err = n.p.snapshotFile(path)
	}
	if err != nil {
		return gofs.ToErrno(err)
	}
	return 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if !n.p.alive() {
		return nil, 0, eio
	}
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{h: fh, n: n}, fl, 0
}

// dirHandle is an open directory: its fsync goes to the node's.
type dirHandle struct {
	h gofs.FileHandle
	n *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.h.(gofs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.h.(gofs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.h.(gofs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.Fsync(ctx, nil, flags)
}
