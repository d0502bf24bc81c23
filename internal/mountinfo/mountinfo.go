// Package mountinfo reads /proc/self/mountinfo, the kernel's list of the
// mounts a process sees (proc(5)): one line a mount,
//
//	36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// with its id, its parent's, the device, the root of the mount within its
// filesystem, the mount point, the per-mount options, any number of
// optional fields (shared:N, master:N...), a "-", the filesystem's type,
// its source and the filesystem's own options. Paths come with the
// kernel's octal escapes undone (\040 for a space).
//
// It is here, not in package spool, because two packages need it and
// neither is the tree: spool for the filesystem a spool is on, spoold for
// the cgroup2 mount its jobs' cgroups live under. It does not promise
// more than the kernel writes: a line it cannot read is skipped.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	ID, Parent int
	// Dev is the device as "major:minor", as st_dev splits it.
	Dev string
	// Root is the path within the filesystem that is mounted at Point.
	Root, Point string
	// Options are the per-mount options ("rw,noatime").
	Options string
	// Optional are the optional fields ("shared:1", "master:2"), if any.
	Optional []string
	// Type is the filesystem's type as mount(8) names it ("ext4",
	// "nfs4", "fuse.glusterfs", "cgroup2"); Source what was mounted.
	Type, Source string
	// SuperOptions are the filesystem's own options.
	SuperOptions string
}

// Path is where mountinfo is read by Scan's callers.
const Path = "/proc/self/mountinfo"

// MaxLine bounds one line: a longer one ends the scan with an error.
const MaxLine = 1 << 20

// Parse reads one line. ok is false for a line that is not one.
func Parse(line string) (m Mount, ok bool) {
	// The kernel separates fields by one space, and escapes a space in
	// a field: split on the space so an empty field (a source of "")
	// keeps its place.
	f := strings.Split(strings.TrimRight(line, "\n"), " ")
	if len(f) < 10 {
		return Mount{}, false
	}
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+4 {
		return Mount{}, false
	}
	id, err1 := strconv.Atoi(f[0])
	parent, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || !strings.Contains(f[2], ":") {
		return Mount{}, false
	}
	m = Mount{ID: id, Parent: parent, Dev: f[2],
		Root: Unescape(f[3]), Point: Unescape(f[4]), Options: f[5],
		Type: Unescape(f[sep+1]), Source: Unescape(f[sep+2]), SuperOptions: f[sep+3]}
	if sep > 6 {
		m.Optional = f[6:sep]
	}
	return m, true
}

// Scan calls fn with each mount r lists, in order, until fn returns false.
// Lines that are not a mount are skipped.
func Scan(r io.Reader, fn func(Mount) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		if m, ok := Parse(sc.Text()); ok && !fn(m) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", Path, err)
	}
	return nil
}

// ScanSelf is Scan of this process's /proc/self/mountinfo.
func ScanSelf(fn func(Mount) bool) error {
	f, err := os.Open(Path)
	if err != nil {
		return err
	}
	defer f.Close()
	return Scan(f, fn)
}

// Unescape undoes mountinfo's octal escapes (\040 for a space, \011 a
// tab, \012 a newline, \134 a backslash); anything else is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
