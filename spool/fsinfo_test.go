package spool

import (
	"testing"

	"github.com/vmspool/vmspool/internal/mountinfo"
)

func TestFilesystemOf(t *testing.T) {
	for _, tc := range []struct {
		line, dev string
		want      Filesystem
		match     bool
	}{
		{"36 35 98:0 / /mnt rw,noatime shared:1 - ext3 /dev/root rw,errors=continue", "98:0",
			Filesystem{Type: "ext3", Options: "rw,noatime,rw,errors=continue"}, true},
		{"77 52 0:40 / /srv/spool rw,nosuid,nodev,relatime - fuse.glusterfs 10.0.0.1:spool rw,user_id=0", "0:40",
			Filesystem{Type: "fuse.glusterfs", Options: "rw,nosuid,nodev,relatime,rw,user_id=0"}, true},
		{"80 52 0:51 / /var/spool/vm rw,relatime - nfs4 srv:/vm rw,vers=4.2,acregmax=5,local_lock=none", "0:51",
			Filesystem{Type: "nfs4", Options: "rw,relatime,rw,vers=4.2,acregmax=5,local_lock=none"}, true},
		{"36 35 98:0 / /mnt rw - ext3 /dev/root rw", "98:1", Filesystem{}, false},
		{"garbage", "98:0", Filesystem{}, false},
	} {
		m, _ := mountinfo.Parse(tc.line)
		got, ok := filesystemOf(m, tc.dev)
		if ok != tc.match || got != tc.want {
			t.Errorf("filesystemOf(%q, %s) = %+v, %v; want %+v, %v", tc.line, tc.dev, got, ok, tc.want, tc.match)
		}
	}
	fs := Filesystem{Options: "rw,vers=4.2,acregmax=5,noac"}
	if v, ok := fs.Option("acregmax"); !ok || v != "5" {
		t.Errorf("Option(acregmax) = %q, %v", v, ok)
	}
	if v, ok := fs.Option("noac"); !ok || v != "" {
		t.Errorf("Option(noac) = %q, %v", v, ok)
	}
	if _, ok := fs.Option("actimeo"); ok {
		t.Error("Option(actimeo) found")
	}
}

// A spool's own filesystem is found in this process's mountinfo, by the
// device its root is on.
func TestFilesystem(t *testing.T) {
	s := testSpool(t)
	fs, err := s.Filesystem()
	if err != nil {
		t.Fatal(err)
	}
	if fs.Type == "" || fs.Options == "" {
		t.Errorf("Filesystem() = %+v; want a type and options", fs)
	}
}
