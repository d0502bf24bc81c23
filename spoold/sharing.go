package spoold

import (
	"fmt"
	"strings"

	"github.com/vmspool/vmspool/spool"
)

// Whether another host may use the spool, and so whether a run is fenced.
// The fence (fence.go) ends a job whose heartbeat has not been written for
// half the lease, so that another host, which judges a lease by its
// heartbeat alone, never runs the job beside a first run that still lives.
// On a spool only this host uses there is no such host: every reader of a
// lease here believes its process (pid and start time) whatever the
// heartbeat's age (spool.Lease.ByProcess), and a fence would only end a
// live run for a pause of its daemon (SIGSTOP, a debugger, a suspended
// host, a stalled disk). So a run is fenced only on a shared spool
// (docs/spoold.md, "Cut off"):
//
//   - --shared on: always; --shared off: not until a lease of another
//     host is seen;
//   - --shared auto (the default): with --poll, on a filesystem that is
//     not known as local (a network or cluster filesystem, any FUSE
//     filesystem but fuse-overlayfs, one of a type this list does not
//     know), or when the filesystem cannot be told;
//   - whatever the flag: when this daemon's command name does not begin
//     with "spool" (other readers then judge its leases by their
//     heartbeat, spool.Lease.ByProcess), and from the moment it sees a
//     lease of another host (its recovery reads every lease in the
//     tree), for the rest of its life. Another host's spoold that starts on a local
//     spool this daemon exports (NFS from this host's disk) is seen so
//     only once it has claimed a job: run such a spool's daemons with
//     --shared on.

// The --shared modes.
const (
	SharedAuto = "auto"
	SharedOn   = "on"
	SharedOff  = "off"
)

// localFilesystems are the filesystem types only the host that mounts
// them uses.
var localFilesystems = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "zfs": true,
	"f2fs": true, "bcachefs": true, "jfs": true, "reiserfs": true, "nilfs2": true,
	"tmpfs": true, "ramfs": true, "overlay": true, "fuse.fuse-overlayfs": true,
	"vfat": true, "exfat": true, "ntfs3": true, "hfsplus": true,
}

// MayBeShared says whether hosts other than this one may use a spool on
// fs: a filesystem of a type known as local is this host's alone; any
// other may be shared (the safe default, under which runs are fenced).
func MayBeShared(fs spool.Filesystem) bool {
	return EngineOf(fs).Shared || !localFilesystems[fs.Type]
}

// decideShared sets whether the spool is shared at the daemon's start,
// from its configuration and its filesystem.
func (d *Daemon) decideShared() {
	// The other readers of its leases believe this daemon's process only
	// if its leases name it exactly (start time, boot id) and its name
	// is one of this project's programs; otherwise they judge its leases
	// by their heartbeat, and its runs are fenced as if another host
	// looked.
	if comm, err := spool.ProcessName(d.pid); err != nil || !strings.HasPrefix(comm, spool.ProgramPrefix) {
		d.share(fmt.Sprintf("its command name %q does not begin with %q: its leases are judged by their heartbeat", comm, spool.ProgramPrefix))
		return
	}
	if d.pst == 0 || d.boot == "" {
		d.share("its process's start time or the boot id cannot be read: its leases are judged by their heartbeat")
		return
	}
	switch d.cfg.Shared {
	case SharedOn:
		d.share("--shared on")
	case SharedOff:
	default:
		if d.cfg.Poll > 0 {
			d.share("--poll")
			return
		}
		fs, err := d.s.Filesystem()
		switch {
		case err != nil:
			d.share(fmt.Sprintf("its filesystem cannot be told (%v)", err))
		case MayBeShared(fs):
			d.share("its filesystem is " + fs.Type)
		default:
			d.sharedWhy.Store(fmt.Sprintf("its filesystem is %s (local)", fs.Type))
		}
	}
}

// share makes the spool shared, for why, from now on.
func (d *Daemon) share(why string) {
	d.sharedWhy.Store(why)
	d.sharedOn.Store(true)
}

// shared reports whether another host may use the spool: runs are fenced.
func (d *Daemon) shared() bool { return d.sharedOn.Load() }

// sawHost notes a lease of host: one of another host makes the spool
// shared from now on, whatever --shared said.
func (d *Daemon) sawHost(host string) {
	if host == "" || host == d.cfg.Host || d.shared() {
		return
	}
	d.share("a lease of host " + spool.Printable(host) + " is in it")
	d.log.WithField("worker", d.cfg.Worker).Warn("the spool is shared: a lease of host " + spool.Printable(host) +
		" is in it; runs are fenced from now on (docs/spoold.md, \"Cut off\")")
}
