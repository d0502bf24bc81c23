package mountinfo

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Mount
		ok         bool
	}{
		{"proc(5)'s example, one optional field",
			"36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			Mount{ID: 36, Parent: 35, Dev: "98:0", Root: "/mnt1", Point: "/mnt/parent", Options: "rw,noatime",
				Optional: []string{"master:1"}, Type: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"}, true},
		{"no optional field",
			"77 52 0:40 / /srv/spool rw,nosuid,nodev,relatime - fuse.glusterfs 10.0.0.1:spool rw,user_id=0",
			Mount{ID: 77, Parent: 52, Dev: "0:40", Root: "/", Point: "/srv/spool", Options: "rw,nosuid,nodev,relatime",
				Type: "fuse.glusterfs", Source: "10.0.0.1:spool", SuperOptions: "rw,user_id=0"}, true},
		{"two optional fields",
			"29 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 propagate_from:2 - cgroup2 cgroup2 rw,nsdelegate",
			Mount{ID: 29, Parent: 1, Dev: "0:26", Root: "/", Point: "/sys/fs/cgroup", Options: "rw,nosuid,nodev,noexec,relatime",
				Optional: []string{"shared:4", "propagate_from:2"}, Type: "cgroup2", Source: "cgroup2", SuperOptions: "rw,nsdelegate"}, true},
		{"escaped spaces, tab and backslash in the paths",
			`80 52 0:51 /a\040b /var/spool/my\040spool\011x\134y rw,relatime shared:9 - nfs4 srv:/vm\040x rw,vers=4.2`,
			Mount{ID: 80, Parent: 52, Dev: "0:51", Root: "/a b", Point: "/var/spool/my spool\tx\\y", Options: "rw,relatime",
				Optional: []string{"shared:9"}, Type: "nfs4", Source: "srv:/vm x", SuperOptions: "rw,vers=4.2"}, true},
		{"an empty source keeps the fields in their places",
			"90 1 0:60 / /run/x rw - tmpfs  rw,size=10k",
			Mount{ID: 90, Parent: 1, Dev: "0:60", Root: "/", Point: "/run/x", Options: "rw",
				Type: "tmpfs", Source: "", SuperOptions: "rw,size=10k"}, true},
		{"a mount point named -",
			"91 1 0:61 / - rw - tmpfs tmpfs rw",
			Mount{ID: 91, Parent: 1, Dev: "0:61", Root: "/", Point: "-", Options: "rw",
				Type: "tmpfs", Source: "tmpfs", SuperOptions: "rw"}, true},
		{"an escape cut short is kept", `92 1 0:62 / /mnt/x\04 rw - ext4 /dev/sda rw`,
			Mount{ID: 92, Parent: 1, Dev: "0:62", Root: "/", Point: `/mnt/x\04`, Options: "rw",
				Type: "ext4", Source: "/dev/sda", SuperOptions: "rw"}, true},
		{"no separator", "36 35 98:0 / /mnt rw shared:1 ext3 /dev/root rw", Mount{}, false},
		{"too few fields after the separator", "36 35 98:0 / /mnt rw - ext3 /dev/root", Mount{}, false},
		{"not a number", "x 35 98:0 / /mnt rw - ext3 /dev/root rw", Mount{}, false},
		{"not a device", "36 35 980 / /mnt rw - ext3 /dev/root rw", Mount{}, false},
		{"garbage", "garbage", Mount{}, false},
		{"empty", "", Mount{}, false},
	} {
		got, ok := Parse(tc.line)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Parse(%q) = %+v, %v; want %+v, %v", tc.name, tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`:         "/sys/fs/cgroup",
		`/mnt/with\040space`:     "/mnt/with space",
		`/a\134b`:                `/a\b`,
		`/trailing\04`:           `/trailing\04`,
		`/tab\011and\012newline`: "/tab\tand\nnewline",
		`/not\999octal`:          `/not\999octal`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestScan(t *testing.T) {
	in := "garbage\n" +
		"36 35 98:0 / /mnt rw - ext3 /dev/root rw\n" +
		"37 35 98:1 / /mnt/b rw - ext4 /dev/sdb rw\n" +
		"38 35 98:2 / /mnt/c rw - ext4 /dev/sdc rw\n"
	var points []string
	err := Scan(strings.NewReader(in), func(m Mount) bool {
		points = append(points, m.Point)
		return m.ID < 37
	})
	if err != nil || !reflect.DeepEqual(points, []string{"/mnt", "/mnt/b"}) {
		t.Errorf("Scan = %q, %v; want /mnt and /mnt/b, then stopped", points, err)
	}
	long := "36 35 98:0 / /" + strings.Repeat("a", MaxLine) + " rw - ext3 /dev/root rw\n"
	if err := Scan(strings.NewReader(long), func(Mount) bool { return true }); err == nil {
		t.Error("a line longer than MaxLine was read")
	}
}

// This process's own mountinfo has a root mount.
func TestScanSelf(t *testing.T) {
	root := false
	if err := ScanSelf(func(m Mount) bool { root = root || m.Point == "/"; return true }); err != nil {
		t.Skipf("no %s here: %v", Path, err)
	}
	if !root {
		t.Errorf("%s lists no mount at /", Path)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue")
	f.Add(`80 52 0:51 / /a\040b rw - nfs4 srv:/vm rw`)
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := Parse(line)
		if !ok {
			return
		}
		if !strings.Contains(m.Dev, ":") || strings.Contains(m.Options, " ") || strings.Contains(m.SuperOptions, " ") {
			t.Errorf("Parse(%q) = %+v", line, m)
		}
	})
}
