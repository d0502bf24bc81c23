package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenSubdir(t *testing.T) {
	s := testSpool(t)
	in, err := s.OpenSubdir("gate/in", 0o770)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fi, _ := os.Stat(s.Path("gate/in"))
	if fi.Mode().Perm() != 0o770 {
		t.Errorf("gate/in is %v", fi.Mode().Perm())
	}
	done, err := s.OpenSubdir("gate/done", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	defer done.Close()
	if err := in.Write("a.sh", []byte("ls\n")); err != nil {
		t.Fatal(err)
	}
	// A link swapped in at gate/in after it was opened leads nowhere: the
	// handle still reaches the directory it opened.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "a.sh"), []byte("outside"), 0o600)
	if err := os.Rename(s.Path("gate/in"), s.Path("gate/in.old")); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, s.Path("gate/in"))
	if b, err := in.Read("a.sh", 100); err != nil || string(b) != "ls\n" {
		t.Errorf("Read = %q, %v", b, err)
	}
	if err := in.MoveTo("a.sh", done, "a.sh"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "a.sh")); string(b) != "outside" {
		t.Errorf("the file outside is %q", b)
	}
	if _, err := os.Stat(s.Path("gate/done/a.sh")); err != nil {
		t.Error(err)
	}
	// Opened again, the link is refused; so are a FIFO's reads and a
	// document over the bound.
	if _, err := s.OpenSubdir("gate/in", 0o770); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenSubdir over a symlink: %v", err)
	}
	os.WriteFile(s.Path("gate/done/big"), make([]byte, 200), 0o640)
	if _, err := done.Read("big", 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read over the bound: %v", err)
	}
}

// A Subdir's Read trusts the owners the Spool trusts (TrustOwners,
// TrustMembers), and OpenSubdirGroup gives the directory its group before
// its mode.
func TestSubdirTrust(t *testing.T) {
	s := testSpool(t)
	me := os.Geteuid()
	gid := os.Getegid()
	in, err := s.OpenSubdirGroup("gate/in", 0o770, gid)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || fi.Mode().Perm() != 0o770 || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
		t.Fatalf("gate/in: %v, %v", fi, err)
	}
	if err := os.WriteFile(s.Path("gate/in/a.sh"), []byte("ls\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Read("a.sh", 100); err != nil {
		t.Errorf("without TrustOwners every owner is trusted: %v", err)
	}
	s.TrustOwners(me + 1)
	if _, err := in.Read("a.sh", 100); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), fmt.Sprintf("uid %d", me)) {
		t.Errorf("Read of an untrusted owner's file: %v", err)
	}
	s.TrustMembers("writers", func(uid uint32) bool { return uid == uint32(me) })
	if _, err := in.Read("a.sh", 100); err != nil {
		t.Errorf("Read of a trusted group member's file: %v", err)
	}
	s.TrustMembers("writers", func(uint32) bool { return false })
	if _, err := in.Read("a.sh", 100); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "group writers") {
		t.Errorf("Read of a non-member's file: %v", err)
	}
	s.TrustMembers("", nil)
	s.TrustOwners(me)
	if _, err := in.Read("a.sh", 100); err != nil {
		t.Errorf("Read of our own file: %v", err)
	}
}
