package spool

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/vmspool/vmspool/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// Filesystem is what the kernel says of the filesystem a spool is on: its
// type as mount(8) names it ("ext4", "nfs4", "fuse.glusterfs") and its
// mount options, the per-mount and the filesystem's own joined by commas.
// The engine's own settings (a GlusterFS volume's, a Ceph cluster's) are
// not visible here.
type Filesystem struct {
	Type    string
	Options string
}

// Option returns the value of the mount option name ("acregmax") and
// whether it is set; a flag option ("local_lock" has a value, "ro" not)
// has the value "".
func (f Filesystem) Option(name string) (string, bool) {
	for _, o := range strings.Split(f.Options, ",") {
		k, v, _ := strings.Cut(o, "=")
		if k == name {
			return v, true
		}
	}
	return "", false
}

// Filesystem reads the filesystem of the spool's directory from
// /proc/self/mountinfo: the mount whose device is the directory's (the
// last one listed, as a later mount hides an earlier one).
func (s *Spool) Filesystem() (Filesystem, error) {
	fi, err := s.root.Stat(".")
	if err != nil {
		return Filesystem{}, fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Filesystem{}, fmt.Errorf("spool %s: no device number", s.RootPath)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	var found Filesystem
	ok = false
	err = mountinfo.ScanSelf(func(m mountinfo.Mount) bool {
		if fs, match := filesystemOf(m, dev); match {
			found, ok = fs, true
		}
		return true
	})
	if err != nil {
		return Filesystem{}, fmt.Errorf("spool %s: its filesystem: %w", s.RootPath, err)
	}
	if !ok {
		return Filesystem{}, fmt.Errorf("spool %s: device %s is not in %s", s.RootPath, dev, mountinfo.Path)
	}
	return found, nil
}

// filesystemOf is the Filesystem of a mount if its device is dev: its
// type, and its per-mount options and the filesystem's own joined.
func filesystemOf(m mountinfo.Mount, dev string) (Filesystem, bool) {
	if m.Dev != dev {
		return Filesystem{}, false
	}
	opts := m.Options
	if m.SuperOptions != "" {
		opts += "," + m.SuperOptions
	}
	return Filesystem{Type: m.Type, Options: opts}, true
}
