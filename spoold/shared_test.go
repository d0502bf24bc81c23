package spoold

import (
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestCheckShared(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name        string
		fs          spool.Filesystem
		poll, lease time.Duration
		killGrace   time.Duration
		refused     string // a part of the refusal; "" for none
	}{
		{"local disk, no poll", spool.Filesystem{Type: "ext4"}, 0, 30 * s, 5 * s, ""},
		{"local disk, short lease", spool.Filesystem{Type: "ext4"}, 0, s, 5 * s, ""},
		{"sshfs without poll", spool.Filesystem{Type: "fuse.sshfs"}, 0, 30 * s, 5 * s, "--poll"},
		{"GlusterFS without poll", spool.Filesystem{Type: "fuse.glusterfs"}, 0, 30 * s, 5 * s, "GlusterFS"},
		{"CephFS, kernel client, without poll", spool.Filesystem{Type: "ceph"}, 0, 30 * s, 5 * s, "CephFS"},
		{"sshfs, the defaults", spool.Filesystem{Type: "fuse.sshfs"}, s, 30 * s, 5 * s, ""},
		{"sshfs, the proof's settings", spool.Filesystem{Type: "fuse.sshfs"}, 200 * time.Millisecond, 6 * s, 500 * time.Millisecond, ""},
		{"sshfs, a lease too short for its kill grace", spool.Filesystem{Type: "fuse.sshfs"}, s, 6 * s, 5 * s, "want --lease of at least 14.7s"},
		{"ceph-fuse, lease 2s", spool.Filesystem{Type: "fuse.ceph-fuse"}, s, 2 * s, 500 * time.Millisecond, "too short"},
		{"sshfs, the proof's lease with a kill grace of 1s", spool.Filesystem{Type: "fuse.sshfs"}, s, 6 * s, s, "want --lease of at least 6.7s"},
		{"NFS, stock attribute cache", spool.Filesystem{Type: "nfs4", Options: "rw,vers=4.2"}, s, 2 * time.Minute, 5 * s, "want --lease of at least 2m12.7s"},
		{"NFS, actimeo=1", spool.Filesystem{Type: "nfs4", Options: "rw,vers=4.2,actimeo=1"}, s, 2 * time.Minute, 5 * s, ""},
		{"NFS, acregmax and acdirmax 3", spool.Filesystem{Type: "nfs", Options: "rw,acregmax=3,acdirmax=3"}, s, 30 * s, 5 * s, ""},
		{"NFS, noac", spool.Filesystem{Type: "nfs4", Options: "rw,noac"}, s, 30 * s, 5 * s, ""},
		{"NFS, local_lock=flock", spool.Filesystem{Type: "nfs4", Options: "rw,actimeo=1,local_lock=flock"}, s, 2 * time.Minute, 5 * s, "local_lock=flock"},
		{"NFS, local_lock=none", spool.Filesystem{Type: "nfs4", Options: "rw,actimeo=1,local_lock=none"}, s, 2 * time.Minute, 5 * s, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckShared(tc.fs, tc.poll, tc.lease, tc.killGrace)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && err == nil:
				t.Errorf("accepted; want a refusal naming %q", tc.refused)
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Errorf("refused with %q; want it to name %q", err, tc.refused)
			}
		})
	}
}

// The lease a refusal names is one spoold accepts, whatever the kill grace
// and the staleness: rounded down to its 100 ms, 2·(5.02 s + 2.35 s) named
// 14.7 s, which the same check refuses.
func TestCheckSharedNamesALeaseItAccepts(t *testing.T) {
	for _, fs := range []spool.Filesystem{
		{Type: "fuse.sshfs"},
		{Type: "nfs4", Options: "rw,actimeo=3"},
		{Type: "cifs", Options: "rw,actimeo=0"},
	} {
		for kg := time.Duration(0); kg <= 6*time.Second; kg += 10 * time.Millisecond {
			err := CheckShared(fs, time.Second, time.Second, kg)
			if err == nil {
				t.Fatalf("%s, kill grace %v: a lease of 1s accepted", fs.Type, kg)
			}
			_, named, ok := strings.Cut(err.Error(), "want --lease of at least ")
			if !ok {
				t.Fatalf("%s, kill grace %v: the refusal names no lease: %v", fs.Type, kg, err)
			}
			named, _, _ = strings.Cut(named, ",")
			lease, err := time.ParseDuration(named)
			if err != nil {
				t.Fatalf("%s, kill grace %v: the named lease %q: %v", fs.Type, kg, named, err)
			}
			if err := CheckShared(fs, time.Second, lease, kg); err != nil {
				t.Errorf("%s, kill grace %v: the named lease %v is refused: %v", fs.Type, kg, lease, err)
			}
		}
	}
}
