package spool

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// quiet says what a watch reports within d (a window in which nothing
// more must come: the point of the check).
func quiet(w *Watch, d time.Duration) []Change {
	var got []Change
	end := time.After(d)
	for {
		select {
		case c, ok := <-w.C:
			if !ok {
				return got
			}
			got = append(got, c)
		case <-end:
			return got
		}
	}
}

// waitFor reads changes until one satisfies ok, failing after 10 s.
func waitFor(t *testing.T, w *Watch, what string, ok func(Change) bool) Change {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c, open := <-w.C:
			if !open {
				t.Fatalf("the watch closed before %s", what)
			}
			if ok(c) {
				return c
			}
		case <-deadline:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// Each change of a watched directory is reported by its name and what
// happened to it, as the kernel reported it; a temporary and a change of
// times or mode are not.
func TestWatchReportsNames(t *testing.T) {
	s := testSpool(t)
	w, err := s.Watch(WatchConfig{}, ProgressDir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := func(n string) string { return s.Path(ProgressDir + "/" + n) }
	for _, tc := range []struct {
		what string
		do   func() error
		want []Change
	}{
		{"a file made empty", func() error { return os.WriteFile(p("a"), nil, 0o640) },
			[]Change{{Dir: ProgressDir, Name: "a", Op: Created}}},
		{"written in place", func() error {
			f, err := os.OpenFile(p("a"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			f.WriteString("x")
			return f.Close()
		}, []Change{{Dir: ProgressDir, Name: "a", Op: Written}}},
		{"renamed", func() error { return os.Rename(p("a"), p("b")) },
			[]Change{{Dir: ProgressDir, Name: "a", Op: Removed}, {Dir: ProgressDir, Name: "b", Op: Created}}},
		{"times changed", func() error { return os.Chtimes(p("b"), time.Now(), time.Now()) }, nil},
		{"a temporary renamed in (an atomic write)", func() error {
			if err := os.WriteFile(p(".b.123"), []byte("{}"), 0o640); err != nil {
				return err
			}
			return os.Rename(p(".b.123"), p("b"))
		}, []Change{{Dir: ProgressDir, Name: "b", Op: Created}}},
		{"removed", func() error { return os.Remove(p("b")) },
			[]Change{{Dir: ProgressDir, Name: "b", Op: Removed}}},
		{"in a directory not watched", func() error { return os.WriteFile(s.Path("x.json"), nil, 0o640) }, nil},
	} {
		if err := tc.do(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		got := quiet(w, 100*time.Millisecond)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: reported %v; want %v", tc.what, got, tc.want)
		}
	}
}

// An overflow of the kernel's queue loses events: the watch says so with
// a Look of the directory, and goes on reporting.
func TestWatchOverflowLooks(t *testing.T) {
	max := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if n, err := strconv.Atoi(string(b[:len(b)-1])); err == nil {
			max = n
		}
	}
	if max > 1<<17 {
		t.Skipf("skipped: the kernel queues %d events; overflowing it takes too long", max)
	}
	s := testSpool(t)
	w, err := s.Watch(WatchConfig{}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Nothing is read meanwhile: fsnotify holds one read of events (up
	// to 4096), the kernel the rest.
	for i := 0; i < max+8192; i++ {
		f, err := os.OpenFile(s.Path(fmt.Sprintf("f%06d", i)), os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	waitFor(t, w, "a Look for the overflow", func(c Change) bool {
		return c.Op == Look && c.Dir == "" && errors.Is(c.Err, ErrOverflow)
	})
	os.WriteFile(s.Path("after"), nil, 0o640)
	waitFor(t, w, "the name made after the overflow", func(c Change) bool { return c.Name == "after" })
}

// A watched directory that is removed, renamed away or replaced, whose
// watch sees nothing any more, is watched again where it now stands,
// with a Look that says so; a symlink put in its place is never followed.
func TestWatchReplacedDirectory(t *testing.T) {
	for _, tc := range []struct {
		what    string
		make    bool
		replace func(s *Spool) error
		watched bool // the new directory is watched
	}{
		{"removed, made again", false, func(s *Spool) error {
			if err := os.Remove(s.Path(ProgressDir)); err != nil {
				return err
			}
			return os.Mkdir(s.Path(ProgressDir), 0o750)
		}, true},
		{"renamed away, another renamed in", false, func(s *Spool) error {
			os.Mkdir(s.Path("new"), 0o750)
			if err := os.Rename(s.Path(ProgressDir), s.Path("old")); err != nil {
				return err
			}
			return os.Rename(s.Path("new"), s.Path(ProgressDir))
		}, true},
		{"removed, made again by the watch", true, func(s *Spool) error { return os.Remove(s.Path(ProgressDir)) }, true},
		{"a symlink put in its place", true, func(s *Spool) error {
			os.Mkdir(s.Path("elsewhere"), 0o750)
			if err := os.Symlink("elsewhere", s.Path("link")); err != nil {
				return err
			}
			// In one step (RENAME_EXCHANGE): a rename away and then a
			// symlink leave a moment in which the watch, which makes
			// its directory, makes it again, and the symlink then finds
			// the name taken.
			return unix.Renameat2(unix.AT_FDCWD, s.Path("link"), unix.AT_FDCWD, s.Path(ProgressDir), unix.RENAME_EXCHANGE)
		}, false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			s := testSpool(t)
			w, err := s.Watch(WatchConfig{Rescan: 50 * time.Millisecond, Make: tc.make}, ProgressDir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := tc.replace(s); err != nil {
				t.Fatal(err)
			}
			waitFor(t, w, "a Look of the replaced directory", func(c Change) bool {
				return c.Dir == ProgressDir && c.Op == Look && errors.Is(c.Err, ErrReplaced)
			})
			os.WriteFile(s.Path(ProgressDir+"/c"), nil, 0o640)
			if !tc.watched {
				for _, c := range quiet(w, 300*time.Millisecond) {
					if c.Name != "" {
						t.Fatalf("reported %v, a change through a symlink", c)
					}
				}
				if fi, err := os.Lstat(s.Path(ProgressDir)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("the symlink was replaced: %v, %v", fi, err)
				}
				return
			}
			// The new directory is watched once the watch saw it (at once,
			// or at the next rescan): names made in it until then are
			// reported, or read at the Look that comes with it.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(10 * time.Second)
			for i := 0; ; i++ {
				select {
				case c := <-w.C:
					if c.Dir == ProgressDir && c.Name != "" {
						return
					}
				case <-tick.C:
					os.WriteFile(s.Path(fmt.Sprintf("%s/c%d", ProgressDir, i)), nil, 0o640)
				case <-deadline:
					t.Fatal("no change of the new directory within 10s")
				}
			}
		})
	}
}

// The poll's rule, by itself: a new stamp is a change, and so is the
// same stamp within WatchSettle of when it was first seen.
func TestWatchPollRule(t *testing.T) {
	t0 := time.Now()
	a, b := DirStamp{ino: 1, mtime: 1}, DirStamp{ino: 1, mtime: 2}
	for _, tc := range []struct {
		what      string
		seen      DirStamp
		since     time.Duration // before now
		now       DirStamp
		look      bool
		sinceThen time.Duration // the since after
	}{
		{"unchanged, settled", a, 3 * time.Second, a, false, 3 * time.Second},
		{"unchanged, within the settle", a, time.Second, a, true, time.Second},
		{"moved", a, time.Hour, b, true, 0},
		{"replaced (another inode)", a, time.Hour, DirStamp{ino: 2, mtime: 1}, true, 0},
		{"gone", a, time.Hour, DirStamp{}, true, 0},
		{"still gone, settled", DirStamp{}, time.Hour, DirStamp{}, false, time.Hour},
	} {
		seen, since := tc.seen, t0.Add(-tc.since)
		if got := moved(&seen, &since, tc.now, t0); got != tc.look || seen != tc.now || t0.Sub(since) != tc.sinceThen {
			t.Errorf("%s: look %v, since %v ago; want %v, %v ago", tc.what, got, t0.Sub(since), tc.look, tc.sinceThen)
		}
	}
}

// Polled, a directory costs a stat a poll: a name added is a Look at the
// next poll; one settled is not looked at again.
func TestWatchPoll(t *testing.T) {
	s := testSpool(t)
	w, err := s.Watch(WatchConfig{Poll: 10 * time.Millisecond}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Polling("") {
		t.Fatal("asked to poll, the root is not polled")
	}
	settleAll := func() {
		w.mu.Lock()
		for _, d := range w.dirs {
			d.since = d.since.Add(-2 * WatchSettle)
		}
		w.mu.Unlock()
	}
	settleAll()
	for _, c := range quiet(w, 100*time.Millisecond) {
		t.Fatalf("settled and unchanged, the poll reported %v", c)
	}
	os.WriteFile(s.Path("j.ready"), nil, 0o640)
	c := waitFor(t, w, "a Look", func(c Change) bool { return true })
	if c.Op != Look || c.Dir != "" || c.Err != nil {
		t.Fatalf("reported %v; want a Look of the root", c)
	}
}

// The safety net is a Look of every directory, whatever was seen.
func TestWatchRescanLooks(t *testing.T) {
	s := testSpool(t)
	w, err := s.Watch(WatchConfig{Rescan: 20 * time.Millisecond}, "", ProgressDir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	seen := map[string]bool{}
	waitFor(t, w, "a Look of both", func(c Change) bool {
		if c.Op == Look && c.Err == nil {
			seen[c.Dir] = true
		}
		return seen[""] && seen[ProgressDir]
	})
}

// Without inotify (its limits reached), a fallback polls; without one,
// the watch fails and says why.
func TestWatchFallback(t *testing.T) {
	s := testSpool(t)
	old := newInotify
	defer func() { newInotify = old }()
	newInotify = func(uint) (*fsnotify.Watcher, error) { return nil, errors.New("too many open files") }
	if _, err := s.Watch(WatchConfig{}, ""); err == nil {
		t.Fatal("no inotify and no fallback, and the watch did not fail")
	}
	w, err := s.Watch(WatchConfig{Fallback: 10 * time.Millisecond}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Polling("") {
		t.Fatal("the fallback does not poll")
	}
	os.WriteFile(s.Path("j.ready"), nil, 0o640)
	waitFor(t, w, "a Look from the fallback's poll", func(c Change) bool { return c.Op == Look })
}

// Add refuses what is not a directory of the tree.
func TestWatchAddRefuses(t *testing.T) {
	s := testSpool(t)
	w, err := s.Watch(WatchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.Symlink(ProgressDir, s.Path("link"))
	os.WriteFile(s.Path("file"), nil, 0o640)
	for _, dir := range []string{"../x", "/etc", "a/../b", "link", "file", "missing"} {
		if err := w.Add(dir); err == nil {
			t.Errorf("Add(%q) was not refused", dir)
		}
	}
	// Added twice, removed once: still watched.
	w.Add(ProgressDir)
	w.Add(ProgressDir)
	w.Remove(ProgressDir)
	os.WriteFile(s.Path(ProgressDir+"/c"), nil, 0o640)
	waitFor(t, w, "a change of the directory added twice, removed once", func(c Change) bool { return c.Name == "c" })
	w.Remove(ProgressDir)
	os.WriteFile(s.Path(ProgressDir+"/d"), nil, 0o640)
	for _, c := range quiet(w, 100*time.Millisecond) {
		t.Errorf("reported %v of a directory removed", c)
	}
}

// follower is what a consumer of a Watch keeps: the names of one
// directory, from the changes, read whole at each Look.
type follower struct {
	names map[string]bool
}

func (f *follower) take(t testing.TB, s *Spool, dir string, c Change) {
	switch {
	case c.Op&Look != 0:
		f.names = listing(s, dir)
	case c.Op&Removed != 0:
		delete(f.names, c.Name)
	case c.Op&Created != 0:
		f.names[c.Name] = true
	}
}

func listing(s *Spool, dir string) map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir(s.Path(dir))
	for _, e := range ents {
		if e.Name()[0] != '.' {
			out[e.Name()] = true
		}
	}
	return out
}

// FuzzWatchFollows: whatever is done to a directory (names made, renamed,
// removed, written; the directory itself replaced), a consumer that takes
// the watch's changes and reads the directory at each Look ends up with
// the directory's names, by inotify and by polling alike.
func FuzzWatchFollows(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, false)
	f.Add([]byte{0, 0, 8, 1, 9, 2}, true)
	f.Add([]byte{8, 8, 0, 8}, false)
	f.Fuzz(func(t *testing.T, ops []byte, poll bool) {
		if len(ops) > 32 {
			ops = ops[:32]
		}
		s := testSpool(t)
		// The kernel's events alone must do, but for a directory replaced:
		// one renamed in after its predecessor went is not watched until
		// the safety net looks.
		cfg := WatchConfig{}
		if poll {
			cfg.Poll = 5 * time.Millisecond
		}
		if slices.ContainsFunc(ops, func(op byte) bool { return op%10 == 8 }) {
			cfg.Rescan = 50 * time.Millisecond
		}
		const dir = ProgressDir
		w, err := s.Watch(cfg, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		fl := &follower{names: listing(s, dir)}
		p := func(n string) string { return s.Path(dir + "/" + n) }
		names := []string{"a", "b", "c", ".t"}
		for i, op := range ops {
			n, m := names[int(op>>4)%len(names)], names[int(op>>6)%len(names)]
			switch op % 10 {
			case 0, 1:
				os.WriteFile(p(n), nil, 0o640)
			case 2:
				os.WriteFile(p(n), []byte("x"), 0o640)
			case 3, 4:
				os.Rename(p(n), p(m))
			case 5, 6:
				os.Remove(p(n))
			case 7:
				os.Chtimes(p(n), time.Now(), time.Now())
			case 8:
				// The directory itself replaced by another.
				os.Mkdir(s.Path("new"), 0o750)
				os.WriteFile(s.Path("new/"+n), nil, 0o640)
				os.Rename(s.Path(dir), s.Path(fmt.Sprintf("old%d", i)))
				os.Rename(s.Path("new"), s.Path(dir))
			case 9:
				f, err := os.OpenFile(p(n), os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					f.WriteString("y")
					f.Close()
				}
			}
			// Taken as they come, as a daemon takes them.
			for done := false; !done; {
				select {
				case c := <-w.C:
					fl.take(t, s, dir, c)
				default:
					done = true
				}
			}
		}
		deadline := time.After(10 * time.Second)
		for !maps(fl.names, listing(s, dir)) {
			select {
			case c := <-w.C:
				fl.take(t, s, dir, c)
			case <-deadline:
				t.Fatalf("after %v (poll %v) the follower has %v; the directory %v", ops, poll, fl.names, listing(s, dir))
			}
		}
	})
}

func maps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
