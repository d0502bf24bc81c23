package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vmspool/vmspool/internal/atomicfile"
)

// Two submitters of one id, each with a Spool of its own (two processes),
// in every way take may work: exactly one queues the job, the other is
// told it already exists, and the spec is the winner's.
func TestSubmitTakesOnce(t *testing.T) {
	for _, how := range []struct {
		name string
		way  atomicfile.Way
	}{{"renameat2", atomicfile.RenameNoReplace}, {"link", atomicfile.Link}} {
		t.Run(how.name, func(t *testing.T) {
			dir := testSpool(t).RootPath
			for round := 0; round < 50; round++ {
				id := fmt.Sprintf("same.%d", round)
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for i := range errs {
					s, err := Open(dir)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					s.taking.Set(how.way)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if i%2 == 0 {
							_, errs[i] = s.Submit(&Spec{ID: id, Chat: "c", Argv: []string{"echo", fmt.Sprint(i)}})
						} else {
							_, errs[i] = s.SubmitBatch([]*Spec{{ID: id, Chat: "c", Argv: []string{"echo", fmt.Sprint(i)}}})
						}
					}()
				}
				wg.Wait()
				won := -1
				for i, err := range errs {
					switch {
					case err == nil && won >= 0:
						t.Fatalf("round %d: submitters %d and %d both queued %s", round, won, i, id)
					case err == nil:
						won = i
					case !strings.Contains(err.Error(), "already exists"):
						t.Fatalf("round %d: submitter %d: %v; want already exists", round, i, err)
					}
				}
				if won < 0 {
					t.Fatalf("round %d: nobody queued %s: %v", round, id, errs)
				}
				s, _ := Open(dir)
				sp, err := s.ReadSpec(id)
				s.Close()
				if err != nil || sp.Argv[1] != fmt.Sprint(won) {
					t.Fatalf("round %d: the spec is %v (%v); want submitter %d's", round, sp, err, won)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
}

// Where neither renameat2's flag nor link(2) works, a spec is taken by a
// check and a rename: what is there is still never replaced when seen.
func TestTakeFallback(t *testing.T) {
	s := testSpool(t)
	if _, err := s.Submit(&Spec{ID: "x", Chat: "c", Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	for _, way := range []atomicfile.Way{atomicfile.RenameNoReplace, atomicfile.Link, atomicfile.CheckThenRename} {
		s.taking.Set(way)
		opts := treeOpts(owner{}, atomicfile.InDir(s.dirfd()))
		if err := s.takeSpec("x", []byte("{}"), opts); !errors.Is(err, fs.ErrExist) {
			t.Errorf("way %d: take over an existing spec: %v", way, err)
		}
		if err := s.takeSpec("y", []byte("{}"), opts); err != nil || s.taking.Way() != way {
			t.Errorf("way %d: take of a free name: %v (way now %d)", way, err, s.taking.Way())
		}
		os.Remove(s.Path("y.json"))
	}
	if sp, err := s.ReadSpec("x"); err != nil || sp.Argv[0] != "true" {
		t.Errorf("the first spec: %v %v", sp, err)
	}
	if left, _ := filepath.Glob(filepath.Join(s.RootPath, ".*")); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// Root writing into a spool that belongs to another user (root using
// `spool submit` or `spool answer` on the service user's spool) gives
// every file and directory it makes that user and group: the user's
// daemon can read them.
func TestRootWritesTakeTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files must be made by root in a spool another user owns (CI runs as root)")
	}
	const uid, gid = 65534, 65533
	s := testSpool(t)
	for _, d := range []string{".", ProgressDir, ChatsDir, CorruptDir, GateDir} {
		if err := os.Chown(s.Path(d), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	id, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.SubmitBatch([]*Spec{{Chat: "c", Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteAnswer("c", &Answer{Job: id, Question: "q", Answer: "yes"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestCancel(id, "why"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(id, Event{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteProgress(&Progress{Job: id, Chat: "c", State: Running}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{id + ExtSpec, id + ExtReady, ids[0] + ExtSpec, ids[0] + ExtReady,
		ChatDir("c"), ChatDir("c") + "/" + AnswerFile, id + ExtCancel, id + ExtEvents, ProgressDir + "/c"} {
		fi, err := os.Lstat(s.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s: %d:%d; want the spool's %d:%d", name, st.Uid, st.Gid, uid, gid)
		}
	}
	// Never another user's file, nor one with another link.
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, nil, 0o600)
	if err := os.Link(outside, s.Path("h.events")); err != nil {
		t.Fatal(err)
	}
	s.AppendEvent("h", Event{Text: "x"})
	if fi, _ := os.Stat(outside); fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("a hard link's target was given away: %v", fi.Mode())
	}
}

// CheckRootSafe judges the directory held, its parents and its path.
func TestCheckRootSafe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the spool must be root's, its parents another user's (CI runs as root)")
	}
	mk := func(t *testing.T) (string, string) {
		base := t.TempDir()
		os.Chmod(base, 0o755)
		parent := filepath.Join(base, "parent")
		dir := filepath.Join(parent, "spool")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		os.Chmod(parent, 0o755)
		return parent, dir
	}
	check := func(t *testing.T, dir, want string, change func()) {
		t.Helper()
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if change != nil {
			change()
		}
		err = s.CheckRootSafe(0)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v; want it safe", dir, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v; want %q", dir, err, want)
		}
		if err := s.CheckRootSafe(1000); err != nil {
			t.Errorf("not root: %v", err)
		}
	}
	t.Run("safe", func(t *testing.T) { _, dir := mk(t); check(t, dir, "", nil) })
	t.Run("sticky parent", func(t *testing.T) {
		parent, dir := mk(t)
		os.Chmod(parent, os.ModeSticky|0o777)
		check(t, dir, "", nil)
	})
	t.Run("parent another user's", func(t *testing.T) {
		parent, dir := mk(t)
		os.Chown(parent, 65534, 65534)
		check(t, dir, "above it is owned by uid 65534", nil)
	})
	t.Run("parent writable by others", func(t *testing.T) {
		parent, dir := mk(t)
		os.Chmod(parent, 0o777)
		check(t, dir, "above it is writable by group or others (mode 0777)", nil)
	})
	t.Run("a symlink of another user's on the path", func(t *testing.T) {
		parent, dir := mk(t)
		link := filepath.Join(parent, "link")
		os.Symlink(dir, link)
		os.Lchown(link, 65534, 65534)
		check(t, link, "on its path is owned by uid 65534", nil)
	})
	// The directory held is judged, not what the path names by then: an
	// unsafe spool swapped for a safe one after it was opened is refused.
	t.Run("swapped after the open", func(t *testing.T) {
		_, dir := mk(t)
		os.Chmod(dir, 0o777)
		check(t, dir, "mode 0777", func() {
			os.Rename(dir, dir+".old")
			os.Mkdir(dir, 0o750)
		})
	})
	t.Run("path replaced", func(t *testing.T) {
		_, dir := mk(t)
		check(t, dir, "replaced since", func() {
			os.Rename(dir, dir+".old")
			os.Mkdir(dir, 0o750)
		})
	})
}
