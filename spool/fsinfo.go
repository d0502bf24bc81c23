package spool

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Filesystem{}, fmt.Errorf("spool %s: its filesystem: %w", s.RootPath, err)
	}
	defer f.Close()
	dev := fmt.Sprintf("%d:%d", unixMajor(st.Dev), unixMinor(st.Dev))
	var found Filesystem
	ok = false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if fs, match := mountinfoLine(sc.Text(), dev); match {
			found, ok = fs, true
		}
	}
	if err := sc.Err(); err != nil {
		return Filesystem{}, fmt.Errorf("spool %s: reading /proc/self/mountinfo: %w", s.RootPath, err)
	}
	if !ok {
		return Filesystem{}, fmt.Errorf("spool %s: device %s is not in /proc/self/mountinfo", s.RootPath, dev)
	}
	return found, nil
}

// mountinfoLine parses one line of /proc/self/mountinfo
// ("36 35 98:0 / /mnt rw,noatime shared:1 - ext3 /dev/root rw,errors=continue")
// if its device is dev.
func mountinfoLine(line, dev string) (Filesystem, bool) {
	f := strings.Fields(line)
	if len(f) < 7 || f[2] != dev {
		return Filesystem{}, false
	}
	for i := 6; i+1 < len(f); i++ {
		if f[i] == "-" {
			opts := f[5]
			if i+3 < len(f) {
				opts += "," + f[i+3]
			}
			return Filesystem{Type: f[i+1], Options: opts}, true
		}
	}
	return Filesystem{}, false
}

func unixMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func unixMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }
