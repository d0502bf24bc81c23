package spoold

import (
	"fmt"
	"strconv"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// What a filesystem shared between hosts asks of spoold's settings, checked
// at start (docs/operations.md, "Many hosts, one spool"). Only what the
// kernel shows of the mount can be checked: a GlusterFS volume's options
// or a Ceph cluster's are the operator's to set as documented.

// Engine is what spoold knows of a filesystem type: whether hosts share
// it, and how much older than it is a heartbeat may look there at most
// (its attribute cache, its timestamps' granularity).
type Engine struct {
	Name   string
	Shared bool
	// Stale is how old a heartbeat may look to another host at most.
	Stale time.Duration
}

// EngineOf says what spoold knows of the filesystem fs.
func EngineOf(fs spool.Filesystem) Engine {
	switch fs.Type {
	case "nfs", "nfs4":
		return Engine{Name: "NFS", Shared: true, Stale: nfsAttrCache(fs)}
	case "fuse.sshfs":
		// sftp carries times in whole seconds.
		return Engine{Name: "sshfs", Shared: true, Stale: time.Second}
	case "fuse.glusterfs", "glusterfs":
		// The FUSE client's attribute timeout, 1 s unless set lower.
		return Engine{Name: "GlusterFS", Shared: true, Stale: time.Second}
	case "ceph", "fuse.ceph-fuse", "fuse.ceph":
		// Capabilities keep clients coherent; a second of margin.
		return Engine{Name: "CephFS", Shared: true, Stale: time.Second}
	case "cifs", "smb3":
		return Engine{Name: "SMB", Shared: true, Stale: optSeconds(fs, "actimeo", time.Second)}
	case "9p":
		return Engine{Name: "9p", Shared: true, Stale: time.Second}
	}
	return Engine{Name: fs.Type}
}

// nfsAttrCache is the longest an NFS client keeps a file's or a
// directory's attributes: acregmax and acdirmax (60 s by default), or
// actimeo; none with noac.
func nfsAttrCache(fs spool.Filesystem) time.Duration {
	if _, ok := fs.Option("noac"); ok {
		return 0
	}
	if _, ok := fs.Option("actimeo"); ok {
		return optSeconds(fs, "actimeo", 60*time.Second)
	}
	return max(optSeconds(fs, "acregmax", 60*time.Second), optSeconds(fs, "acdirmax", 60*time.Second))
}

func optSeconds(fs spool.Filesystem, name string, def time.Duration) time.Duration {
	v, ok := fs.Option(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// CheckShared refuses the settings that would break an invariant on the
// filesystem fs:
//   - a shared filesystem without --poll: inotify sees nothing another
//     host does, and a chat's run is guarded across hosts (the claim marks,
//     the leases of the chat) only in poll mode;
//   - NFS with local_lock=flock or all: each host would see only its own
//     locks, and be unable to tell a live attempt's;
//   - a lease too short for the kill grace and the filesystem's staleness:
//     a cut-off host's jobs must be dead before another host can take them
//     over (or run their chats' next jobs), with a margin for the skew
//     bound and the staleness (fence.go, "The timing rule"; docs/spoold.md,
//     "Cut off").
func CheckShared(fs spool.Filesystem, poll, lease, killGrace time.Duration) error {
	e := EngineOf(fs)
	if !e.Shared {
		return nil
	}
	if poll <= 0 {
		return fmt.Errorf("the spool is on %s (%s), which hosts share: inotify sees nothing another host does, and only --poll guards a chat's run across hosts; run with --poll 1s (docs/operations.md, \"Many hosts, one spool\")", e.Name, fs.Type)
	}
	if v, ok := fs.Option("local_lock"); ok && (v == "flock" || v == "all") {
		return fmt.Errorf("the spool is on NFS mounted with local_lock=%s: each host would see only its own locks; mount it without local_lock (docs/operations.md, \"Locks\")", v)
	}
	if fenceMargin(lease, killGrace, e.Stale) < 0 {
		// Rounded up: one rounded down may be refused in turn.
		want := minSharedLease(killGrace, e.Stale)
		if r := want % (100 * time.Millisecond); r != 0 {
			want += 100*time.Millisecond - r
		}
		return fmt.Errorf("--lease %v is too short on %s: a cut-off host's jobs are fenced half a lease after its last heartbeat and killed --kill-grace (%v) later, and must be dead %v (the clocks' skew bound) and %v (how old a heartbeat may look there) before another host can take them over, a lease after it: want --lease of at least %v, or a shorter --kill-grace (docs/spoold.md, \"Cut off\")",
			lease, e.Name, killGrace, SkewBound, e.Stale, want)
	}
	return nil
}
