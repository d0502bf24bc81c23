#!/bin/bash
# ceph.sh: a one-node CephFS (a monitor, a manager without modules, one OSD
# on memory, one MDS; cephx off) served from the namespace vmsp-srv, mounted with
# ceph-fuse by each host through its own link (lib.sh). Every daemon runs in
# the foreground, put in the background here, so that its pid is the one
# recorded. What docs/operations.md ("CephFS") says was proven is what
# this sets up.
#
#   ceph.sh up | down | status | mount SLOT DIR | host SLOT DIR -- CMD
#   ceph.sh fault SLOT partition|loss PCT|heal
#
# Environment:
#   VMSP_BASE                   conf, daemons' data, logs, pids, the admin mount
#                               (/run/vmspool-engines/ceph)
#   VMSP_CEPH_EARLY_REPLY       false (default): the MDS answers a rename once
#                               it is safe, and every client sees it at once;
#                               true (ceph's default) shows about one in three
#                               renames to the other clients 4 to 5 s late
#   VMSP_CEPH_SESSION_TIMEOUT   s a silent client keeps its capabilities (30;
#                               ceph's default 60)
#   VMSP_CEPH_AUTOCLOSE         s before a silent client is evicted (30; ceph's 300)
#   VMSP_FAKETIME, VMSP_HOSTNAME   as in gluster.sh
#
# A cut-off ceph-fuse client hangs (some of its callers in uninterruptible
# sleep); once the MDS evicts it, it is blocklisted and its mount is dead
# for good: `down` aborts such a mount through fusectl and detaches it.
set -euo pipefail
VMSP_ENGINE=ceph
VMSP_SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
. "$(dirname "$VMSP_SELF")/lib.sh"
VMSP_BASE=${VMSP_BASE:-/run/vmspool-engines/ceph}
CONF=$VMSP_BASE/ceph.conf

ceph_() { timeout "${VMSP_CLI_TIMEOUT:-30}" nsenter --net="/run/netns/$VMSP_SRV" ceph -c "$CONF" "$@"; }


daemon() { # daemon NAME CMD...: a server daemon in vmsp-srv, its pid recorded
	local name=$1; shift
	setsid nsenter --net="/run/netns/$VMSP_SRV" "$@" </dev/null >>"$VMSP_BASE/log/$name.out" 2>&1 &
	vmsp_write_pid "$VMSP_BASE/run/$name.pid" $! "$CONF"
}

wait_for() { # wait_for SECONDS WHAT CMD...
	local s=$1 what=$2; shift 2
	for _ in $(seq $((s * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	vmsp_die "no $what after $s s: see $VMSP_BASE/log"
}

free_space() { [ "$(stat -f -c %a "$VMSP_BASE/mnt/admin")" -gt 0 ]; }
osd_up() { ceph_ osd stat 2>/dev/null | grep -q ' 1 up'; }
mds_active() { ceph_ mds stat 2>/dev/null | grep -q 'up:active'; }

down() {
	local f
	vmsp_kill_hosts
	vmsp_umount "$VMSP_BASE/mnt/admin"
	for f in "$VMSP_BASE"/run/client-*.pid "$VMSP_BASE"/run/mds.a.pid "$VMSP_BASE"/run/osd.0.pid \
		"$VMSP_BASE"/run/mgr.x.pid "$VMSP_BASE"/run/mon.a.pid; do
		[ -e "$f" ] && vmsp_kill_pidfile "$f" 5
	done
	vmsp_netns_down
	rm -rf "$VMSP_BASE"
}

up() {
	local t0 fsid uuid
	vmsp_need ceph-mon ceph-mon
	vmsp_need ceph-mgr ceph-mgr
	vmsp_need ceph ceph-common
	vmsp_need ceph-osd ceph-osd
	vmsp_need ceph-mds ceph-mds
	vmsp_need ceph-fuse ceph-fuse
	vmsp_need uuidgen uuid-runtime
	vmsp_need iptables iptables
	down
	t0=$(date +%s.%N)
	mkdir -p "$VMSP_BASE"/{run,log,mnt/admin,mon.a,osd.0,mds.a,mgr.x}
	vmsp_netns_up
	fsid=$(uuidgen)
	cat >"$CONF" <<CONFFILE
[global]
fsid = $fsid
mon host = [v2:$VMSP_SRV_IP:3300,v1:$VMSP_SRV_IP:6789]
mon initial members = a
public network = $VMSP_NET.0/24
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
osd crush chooseleaf type = 0
run dir = $VMSP_BASE/run
admin socket = $VMSP_BASE/run/\$name.asok
log file = $VMSP_BASE/log/\$name.log
keyring = $VMSP_BASE/keyring
mon data = $VMSP_BASE/mon.\$id
osd data = $VMSP_BASE/osd.\$id
mds data = $VMSP_BASE/mds.\$id
mgr data = $VMSP_BASE/mgr.\$id
osd objectstore = memstore
memstore device bytes = 1073741824
osd op num shards = 1
osd op num threads per shard = 2
mds beacon grace = 15
mon osd report timeout = 60
# ceph's default (true) answers a rename before the MDS journal holds it:
# the other clients then see it up to about 5 s late
mds early reply = ${VMSP_CEPH_EARLY_REPLY:-false}
[mgr]
# the manager only for the pools' statistics: without it statfs says 0
# bytes free, and spool submit refuses below its free-space floor
mgr initial modules =
[client]
log file = $VMSP_BASE/log/client.\$pid.log
admin socket = $VMSP_BASE/run/client.\$pid.asok
CONFFILE
	ceph-authtool --create-keyring "$VMSP_BASE/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool "$VMSP_BASE/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
		--cap mds 'allow *' --cap mgr 'allow *' >/dev/null
	monmaptool --create --fsid "$fsid" --addv a "[v2:$VMSP_SRV_IP:3300,v1:$VMSP_SRV_IP:6789]" "$VMSP_BASE/monmap" >/dev/null
	# --mkfs binds to the monitor's address: inside vmsp-srv
	vmsp_in_srv ceph-mon -c "$CONF" --mkfs -i a --monmap "$VMSP_BASE/monmap" --keyring "$VMSP_BASE/keyring"
	daemon mon.a ceph-mon -c "$CONF" -i a -f
	wait_for 30 "monitor" ceph_ mon stat
	daemon mgr.x ceph-mgr -c "$CONF" -i x -f
	uuid=$(uuidgen)
	ceph_ osd new "$uuid" >/dev/null
	vmsp_in_srv ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$uuid" >"$VMSP_BASE/log/osd.0.mkfs" 2>&1
	daemon osd.0 ceph-osd -c "$CONF" -i 0 -f
	ceph_ osd pool create cephfs_metadata 8 8 >/dev/null
	ceph_ osd pool create cephfs_data 8 8 >/dev/null
	ceph_ fs new cephfs cephfs_metadata cephfs_data >/dev/null
	ceph_ fs set cephfs session_timeout "${VMSP_CEPH_SESSION_TIMEOUT:-30}" >/dev/null
	ceph_ fs set cephfs session_autoclose "${VMSP_CEPH_AUTOCLOSE:-30}" >/dev/null
	daemon mds.a ceph-mds -c "$CONF" -i a -f
	wait_for 60 "OSD up" osd_up
	wait_for 90 "active MDS" mds_active
	VMSP_FAKETIME= mount_at "$VMSP_SRV" "$VMSP_BASE/mnt/admin" admin
	wait_for 60 "free space reported (the manager's statistics)" free_space
	vmsp_log "up in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
	echo "admin=$VMSP_BASE/mnt/admin"
}

mount_slot() { mount_at "$VMSP_NS-$1" "$2" "$1"; }

mount_at() { # mount_at NETNS DIR NAME
	local ns=$1 dir=$2 name=$3 pre
	pre=$(vmsp_faketime_prefix)
	mkdir -p "$dir" "$VMSP_BASE/run"
	# -f: the recorded pid is the FUSE daemon's own
	# shellcheck disable=SC2086
	setsid nsenter --net="/run/netns/$ns" $pre ceph-fuse -c "$CONF" -f -n client.admin "$dir" \
		</dev/null >>"$VMSP_BASE/log/fuse-$name.out" 2>&1 &
	printf '%s\n%s\n' $! "$dir" >"$VMSP_BASE/run/client-$name.$$.pid"
	for _ in $(seq 300); do
		grep -q " $dir fuse" /proc/mounts && ls "$dir" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	vmsp_die "mount of $dir failed: see $VMSP_BASE/log/fuse-$name.out"
}

status() {
	echo "mounts:"; grep " fuse.ceph-fuse " /proc/mounts || true
	[ -s "$CONF" ] && VMSP_CLI_TIMEOUT=10 ceph_ -s 2>/dev/null | sed 's/^/  /' || echo "ceph: not running"
}

vmsp_main "$@"
