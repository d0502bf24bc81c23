package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watching the tree: the one way every daemon and command learns that a
// directory of the tree changed.
//
// A Watch reports changes of directories (never of a file: a file's
// inotify watch is lost at its first replacing rename, and a document
// arrives as a new name in its directory). Where the kernel reports
// them, each change is a Change with the name and what happened to it;
// where it cannot (asked to poll, or no inotify to be had), and whenever
// events may have been lost, it is a Look: "anything in this directory
// may have changed: read it". One rule, whatever the cause:
//
//   - the kernel's queue overflowed: a Look of every directory watched by
//     inotify, with ErrOverflow;
//   - a directory was removed, renamed away, replaced by another or
//     unmounted (its watch sees nothing any more): it is watched again
//     where it now stands (made again with WatchConfig.Make), then a Look
//     with ErrReplaced;
//   - polled: each directory's stamp (DirStamp) is read every poll, and a
//     Look is reported while it moves and for WatchSettle after it last
//     moved, since two changes within a filesystem's time granularity (a
//     second over sftp) may leave one stamp;
//   - the safety net: every WatchConfig.Rescan, a Look of every directory
//     whatever was seen, for what no stamp shows (a file rewritten in
//     place) and what inotify never reports (another host's changes on
//     NFS, FUSE or a cluster filesystem).
//
// Changes that happen after Add (or Watch) returns are reported; a caller
// reads the directory once after that, never before, so that nothing
// falls in between. Names that begin with "." are temporaries
// (docs/contract.md, "The tree") and are never reported.
//
// What a Watch does not promise: one Change per change (the kernel merges
// and drops events; a Look stands for any number), the order of changes
// of different directories, or a Look of a directory that did not change
// while polling. A consumer slower than the changes only delays the
// Watch: its events wait in the kernel's queue, and an overflow there
// becomes a Look.
type Watch struct {
	// C delivers the changes, until Close.
	C <-chan Change

	s    *Spool
	cfg  WatchConfig
	base string            // the root's absolute path: inotify's names begin with it
	fw   *fsnotify.Watcher // nil when no directory is watched by inotify
	out  chan Change
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu   sync.Mutex
	dirs map[string]*watchedDir // by name in the tree ("" is the root)
}

// WatchConfig says how a Watch watches.
type WatchConfig struct {
	// Poll, if positive, replaces inotify: every Poll, each directory's
	// stamp is read (one lstat) and a Look reported if it moved. For
	// shared filesystems, whose other hosts' changes inotify never sees.
	Poll time.Duration
	// Fallback, if positive, is the poll of a directory inotify cannot
	// watch (no inotify instance or watch left: fs.inotify's limits);
	// zero: Watch and Add fail then instead.
	Fallback time.Duration
	// Rescan, if positive, is the safety net: a Look of every directory
	// every Rescan, whatever was seen, and (with inotify) the check for a
	// directory replaced or unmounted. Zero: none.
	Rescan time.Duration
	// Make makes a missing directory (and its missing parents in the
	// tree), at Add and when it was removed.
	Make bool
	// Buffer is how many events wait between the kernel and C (fsnotify's
	// buffer), beside the kernel's own queue.
	Buffer int
}

// Op says what a Change reports.
type Op uint8

// The changes. A Create or a rename into the directory is Created (an
// atomic write's arrival); a write into a file in place is Written; a
// removal or a rename away is Removed. A change of mode or times is not
// reported.
const (
	Created Op = 1 << iota
	Written
	Removed
	// Look: anything in the directory may have changed unseen. Read it.
	Look
)

func (op Op) String() string {
	var s []string
	for _, o := range []struct {
		op   Op
		name string
	}{{Created, "created"}, {Written, "written"}, {Removed, "removed"}, {Look, "look"}} {
		if op&o.op != 0 {
			s = append(s, o.name)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// Why a Look was reported, when events may have been lost.
var (
	ErrOverflow = errors.New("the kernel's queue of events overflowed: events were lost")
	ErrReplaced = errors.New("the directory was removed, replaced or unmounted: watching it again")
)

// WatchSettle is how long after a polled directory's stamp last moved it
// is still reported as changed: two changes within a filesystem's time
// granularity (a second over sftp) may leave one stamp.
const WatchSettle = 2 * time.Second

// Change is one change of a watched directory.
type Change struct {
	// Dir is the directory as given to Add: "" for the root, or a name of
	// the tree (progress, chats/<chat>, gate/in).
	Dir string
	// Name is the name in Dir that changed; "" for a Look.
	Name string
	Op   Op
	// Err, on a Look, says why events may have been lost (ErrOverflow,
	// ErrReplaced, or the watch's own error); nil for a poll's Look and
	// the safety net's.
	Err error
}

// watchedDir is one directory watched.
type watchedDir struct {
	name   string
	path   string // as inotify names it
	refs   int    // Adds less Removes
	polled bool   // polled rather than watched by inotify
	id     dirID  // what inotify watches, to tell a replaced directory
	lost   bool   // not watched: gone, or inotify would not have it back
	seen   DirStamp
	since  time.Time // when seen was first seen (the poll's settle)
}

type dirID struct{ dev, ino uint64 }

// DirStamp is what changes when a name is added to, removed from or
// renamed in a directory: its mtime and ctime, and its inode and device,
// should the directory be replaced. What it does not promise is a new
// stamp for two changes within the filesystem's time granularity (a
// second over sftp): a poller allows for that (WatchSettle).
type DirStamp struct {
	dev, ino, nlink uint64
	mtime, ctime    int64
}

// DirStamp reads the stamp of the directory name of the tree ("" for the
// root), never through a symlink. The zero stamp, and an error, for a
// directory that is not there.
func (s *Spool) DirStamp(name string) (DirStamp, error) {
	fi, err := s.lstatDir(name)
	if err != nil {
		return DirStamp{}, err
	}
	return stampOf(fi), nil
}

func stampOf(fi fs.FileInfo) DirStamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return DirStamp{mtime: fi.ModTime().UnixNano()}
	}
	return DirStamp{dev: uint64(st.Dev), ino: st.Ino, nlink: uint64(st.Nlink),
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// lstatDir describes the directory name of the tree ("" for the root),
// refusing anything but a directory there.
func (s *Spool) lstatDir(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	var err error
	if name == "" {
		fi, err = s.root.Stat(".")
	} else {
		fi, err = s.root.Lstat(name)
	}
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", s.Path(name), err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("spool %s: %w (%s; want a directory)", s.Path(name), ErrNotRegular, kind(fi))
	}
	return fi, nil
}

// Watch starts watching the directories dirs of the tree ("" for the
// root): see Watch. Close it when done.
func (s *Spool) Watch(cfg WatchConfig, dirs ...string) (*Watch, error) {
	base, err := filepath.Abs(s.RootPath)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	out := make(chan Change)
	w := &Watch{C: out, s: s, cfg: cfg, base: filepath.Clean(base), out: out,
		done: make(chan struct{}), dirs: make(map[string]*watchedDir)}
	if cfg.Poll <= 0 {
		fw, err := newInotify(uint(max(cfg.Buffer, 0)))
		switch {
		case err == nil:
			w.fw = fw
		case cfg.Fallback <= 0:
			return nil, fmt.Errorf("spool %s: inotify: %w", s.RootPath, err)
		}
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, err
		}
	}
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// newInotify is fsnotify's constructor; a test puts one in that fails, as
// inotify does where its limits are reached.
var newInotify = fsnotify.NewBufferedWatcher

// Polling reports whether the directory dir is polled rather than watched
// by inotify (asked to poll, or inotify could not watch it).
func (w *Watch) Polling(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.dirs[dir]; d != nil {
		return d.polled
	}
	return w.fw == nil
}

// Add watches one more directory of the tree ("" for the root, or a
// slash-separated name such as chats/<chat>). A symlink, or anything but
// a directory, in its place is refused. Adding a directory watched
// already counts: it is watched until as many Removes.
func (w *Watch) Add(dir string) error {
	if dir != "" && (path.IsAbs(dir) || path.Clean(dir) != dir || dir == ".." || strings.HasPrefix(dir, "../")) {
		return fmt.Errorf("spool: watch %q: not a directory of the tree", dir)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.dirs[dir]; d != nil {
		d.refs++
		return nil
	}
	if w.cfg.Make && dir != "" {
		if err := w.s.makeDirs(dir); err != nil {
			return err
		}
	}
	d := &watchedDir{name: dir, path: filepath.Join(w.base, filepath.FromSlash(dir)), refs: 1}
	fi, err := w.s.lstatDir(dir)
	if err != nil {
		return err
	}
	d.seen, d.since = stampOf(fi), time.Now()
	if err := w.watchLocked(d); err != nil {
		return err
	}
	w.dirs[dir] = d
	return nil
}

// watchLocked puts d under inotify, or under the poll when asked to poll
// or, with a fallback, when inotify cannot have it.
func (w *Watch) watchLocked(d *watchedDir) error {
	if w.fw == nil {
		d.polled = true
		return nil
	}
	err := w.fw.Add(d.path)
	if err == nil {
		// What inotify watches is what stands at the path now; a symlink
		// swapped in between the check and the add is found replaced at
		// the next check.
		if fi, lerr := w.s.lstatDir(d.name); lerr == nil {
			d.id = idOfDir(fi)
		}
		d.polled = false
		return nil
	}
	if w.cfg.Fallback > 0 {
		d.polled = true
		return nil
	}
	return fmt.Errorf("spool %s: watching it: %w", w.s.Path(d.name), err)
}

func idOfDir(fi fs.FileInfo) dirID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return dirID{dev: uint64(st.Dev), ino: st.Ino}
	}
	return dirID{}
}

// makeDirs makes the directory name of the tree and its missing parents,
// with the tree's mode.
func (s *Spool) makeDirs(name string) error {
	parts := strings.Split(name, "/")
	for i := range parts {
		if err := s.mkdir(strings.Join(parts[:i+1], "/")); err != nil {
			return err
		}
	}
	return nil
}

// Remove stops watching dir once it was removed as often as it was added.
func (w *Watch) Remove(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.dirs[dir]
	if d == nil {
		return
	}
	if d.refs--; d.refs > 0 {
		return
	}
	delete(w.dirs, dir)
	if !d.polled && w.fw != nil {
		w.fw.Remove(d.path)
	}
}

// Close stops the watch and closes C.
func (w *Watch) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		if w.fw != nil {
			err = w.fw.Close()
		}
		w.wg.Wait()
	})
	return err
}

func (w *Watch) loop() {
	defer w.wg.Done()
	defer close(w.out)
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fw != nil {
		events, errs = w.fw.Events, w.fw.Errors
	}
	var pollC, rescanC <-chan time.Time
	if every := w.pollEvery(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		pollC = t.C
	}
	if w.cfg.Rescan > 0 {
		t := time.NewTicker(w.cfg.Rescan)
		defer t.Stop()
		rescanC = t.C
	}
	for {
		var batch []Change
		select {
		case <-w.done:
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			batch = w.event(ev)
		case err, ok := <-errs:
			// Always drained: fsnotify feeds Events and Errors from one
			// goroutine, so an unread overflow would stall it for good.
			if !ok {
				errs = nil
				continue
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				err = ErrOverflow
			}
			batch = w.looks(func(d *watchedDir) bool { return !d.polled }, err)
		case <-pollC:
			batch = w.poll(time.Now())
		case <-rescanC:
			batch = w.rescan()
		}
		for _, c := range batch {
			select {
			case w.out <- c:
			case <-w.done:
				return
			}
		}
	}
}

// pollEvery is the poll's interval: Poll when asked to poll, else the
// fallback's (0: nothing is ever polled).
func (w *Watch) pollEvery() time.Duration {
	if w.cfg.Poll > 0 {
		return w.cfg.Poll
	}
	return w.cfg.Fallback
}

// event turns one inotify event into a Change, or into a Look of a
// directory that was replaced.
func (w *Watch) event(ev fsnotify.Event) []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := filepath.Clean(ev.Name)
	for _, d := range w.dirs {
		if !d.polled && d.path == name {
			// The directory itself went (removed, renamed away): its
			// watch is gone with it.
			if w.replacedLocked(d, true) {
				return []Change{{Dir: d.name, Op: Look, Err: ErrReplaced}}
			}
			return nil
		}
	}
	parent, base := filepath.Split(name)
	parent = filepath.Clean(parent)
	var dir *watchedDir
	for _, d := range w.dirs {
		if !d.polled && d.path == parent {
			dir = d
			break
		}
	}
	if dir == nil || base == "" || base[0] == '.' {
		return nil // a directory no longer watched, or a temporary
	}
	op := opOf(ev.Op)
	if op == 0 {
		return nil
	}
	return []Change{{Dir: dir.name, Name: base, Op: op}}
}

// opOf maps fsnotify's operations to a Change's: a change of mode or
// times is none.
func opOf(o fsnotify.Op) Op {
	var op Op
	if o.Has(fsnotify.Create) {
		op |= Created
	}
	if o.Has(fsnotify.Write) {
		op |= Written
	}
	if o.Has(fsnotify.Remove) || o.Has(fsnotify.Rename) {
		op |= Removed
	}
	return op
}

// looks is a Look, with err, of every directory that which selects.
func (w *Watch) looks(which func(*watchedDir) bool, err error) []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Change
	for _, d := range w.dirs {
		if which(d) {
			out = append(out, Change{Dir: d.name, Op: Look, Err: err})
		}
	}
	return out
}

// poll reads the stamp of every polled directory and reports a Look of
// each that moved, or moved less than WatchSettle ago.
func (w *Watch) poll(now time.Time) []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Change
	for _, d := range w.dirs {
		if !d.polled {
			continue
		}
		st, _ := w.s.DirStamp(d.name)
		if moved(&d.seen, &d.since, st, now) {
			out = append(out, Change{Dir: d.name, Op: Look})
		}
	}
	return out
}

// moved is the poll's rule: st is new (remembered, with now), or the
// stamp seen last was first seen less than WatchSettle ago.
func moved(seen *DirStamp, since *time.Time, st DirStamp, now time.Time) bool {
	if st != *seen {
		*seen, *since = st, now
		return true
	}
	return now.Sub(*since) < WatchSettle
}

// rescan is the safety net: every directory inotify watches is checked
// for a replacement first, then every directory gets a Look.
func (w *Watch) rescan() []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Change
	for _, d := range w.dirs {
		var err error
		if !d.polled && w.replacedLocked(d, false) {
			err = ErrReplaced
		}
		out = append(out, Change{Dir: d.name, Op: Look, Err: err})
	}
	return out
}

// replacedLocked checks that inotify still watches d where it stands: the
// same inode at its path, and a watch still held (an unmount drops it
// silently). If not, d is watched again (made again with Make; polled if
// inotify cannot have it and there is a fallback) and it returns true;
// a directory that cannot be watched again is tried at each check, and
// reported once. gone says the watch is known lost (an event of the
// directory itself).
func (w *Watch) replacedLocked(d *watchedDir, gone bool) bool {
	fi, err := w.s.lstatDir(d.name)
	if !gone && !d.lost && err == nil && idOfDir(fi) == d.id && w.held(d.path) {
		return false
	}
	w.fw.Remove(d.path)
	d.id = dirID{}
	if err != nil && w.cfg.Make && d.name != "" {
		w.s.makeDirs(d.name)
	}
	wasLost := d.lost
	d.lost = true
	if _, err := w.s.lstatDir(d.name); err == nil && w.watchLocked(d) == nil {
		d.lost = false
	}
	return !(wasLost && d.lost)
}

// held reports whether inotify holds a watch on path.
func (w *Watch) held(p string) bool {
	for _, h := range w.fw.WatchList() {
		if filepath.Clean(h) == p {
			return true
		}
	}
	return false
}
