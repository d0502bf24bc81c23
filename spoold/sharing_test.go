package spoold

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A spool is shared (its runs fenced) by --shared on, by --poll or a
// filesystem not known as local under auto, and, whatever the flag, once
// a lease of another host is seen.
func TestShared(t *testing.T) {
	for _, tc := range []struct {
		fs     string
		shared bool
	}{
		{"ext4", false}, {"xfs", false}, {"tmpfs", false}, {"overlay", false}, {"fuse.fuse-overlayfs", false},
		{"nfs4", true}, {"fuse.sshfs", true}, {"fuse.glusterfs", true}, {"ceph", true}, {"cifs", true},
		{"fuse", true}, {"fuse.rclone", true}, {"gfs2", true}, {"lustre", true}, {"somethingnew", true},
	} {
		if got := MayBeShared(spool.Filesystem{Type: tc.fs}); got != tc.shared {
			t.Errorf("MayBeShared(%s) = %v, want %v", tc.fs, got, tc.shared)
		}
	}
	// The test's spool is on whatever t.TempDir is: told apart by auto.
	for _, tc := range []struct {
		mode string
		poll time.Duration
		want func(local bool) bool
	}{
		{SharedOn, 0, func(bool) bool { return true }},
		{SharedOff, 0, func(bool) bool { return false }},
		{SharedOff, time.Second, func(bool) bool { return false }},
		{SharedAuto, time.Second, func(bool) bool { return true }},
		{SharedAuto, 0, func(local bool) bool { return !local }},
	} {
		s, err := spool.Create(filepath.Join(t.TempDir(), "spool"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fs, err := s.Filesystem()
		local := err == nil && !MayBeShared(fs)
		d, err := New(Config{Spool: s, Shared: tc.mode, Poll: tc.poll, Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.shared(); got != tc.want(local) {
			t.Errorf("--shared %s --poll %v on %s: shared %v (%v)", tc.mode, tc.poll, fs.Type, got, d.sharedWhy.Load())
		}
		d.sawHost("h")
		d.sawHost("")
		if got := d.shared(); got != tc.want(local) {
			t.Errorf("--shared %s: this host's lease changed shared to %v", tc.mode, got)
		}
		d.sawHost("elsewhere")
		if !d.shared() {
			t.Errorf("--shared %s: a lease of another host left the spool unshared", tc.mode)
		}
	}
	if _, err := New(Config{Spool: &spool.Spool{}, Shared: "sometimes"}); err == nil {
		t.Error("--shared sometimes accepted")
	}
}
