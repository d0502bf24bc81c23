#!/bin/bash
# gluster.sh: a one-brick GlusterFS volume served from the namespace
# vmsp-srv, mounted over FUSE by each host through its own link (lib.sh).
# What docs/operations.md ("GlusterFS") says was proven is what this sets up.
#
#   gluster.sh up                  down first (whatever an earlier run left),
#                                  then glusterd, the volume, and the admin
#                                  mount; prints admin=PATH (the spool's parent
#                                  as the file server's side sees it)
#   gluster.sh down                hosts, mounts, daemons (by recorded pid), state
#   gluster.sh mount SLOT DIR      mount the volume at DIR over SLOT's link
#   gluster.sh host SLOT DIR -- CMD   CMD on a host of its own with DIR mounted
#   gluster.sh fault SLOT partition|loss PCT|heal
#   gluster.sh status
#
# Environment:
#   VMSP_BASE            state, logs, pids, the admin mount (/run/vmspool-engines/gluster)
#   VMSP_GL_PROFILE      strict (default): client-side metadata caches off,
#                        FUSE entry and attribute timeouts 0, strict locks;
#                        stock: gluster's defaults (caches show changes up to
#                        a second late: not for a spool)
#   VMSP_GL_PING_TIMEOUT network.ping-timeout, s (default 10; gluster's is 42)
#   VMSP_GL_SET          more "key=value" volume options
#   VMSP_FAKETIME        `mount` and `host`: the FUSE client under libfaketime
#                        with this offset ("+20s"): its writes' mtimes move
#   VMSP_HOSTNAME        `host`: the host's hostname (default the slot)
#
# glusterd runs with a working directory, run directory and CLI socket of
# its own under VMSP_BASE, so an operator's glusterd and /var/lib/glusterd
# are not touched. It refuses a brick on 127.0.0.1, hence the bridge address.
set -euo pipefail
VMSP_ENGINE=gluster
VMSP_SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
. "$(dirname "$VMSP_SELF")/lib.sh"
VMSP_BASE=${VMSP_BASE:-/run/vmspool-engines/gluster}
VOL=spool
PROFILE=${VMSP_GL_PROFILE:-strict}
SOCK=$VMSP_BASE/run/glusterd.socket

cli() { timeout "${VMSP_CLI_TIMEOUT:-30}" gluster --mode=script --glusterd-sock="$SOCK" "$@"; }


down() {
	local f
	vmsp_kill_hosts
	vmsp_umount "$VMSP_BASE/mnt/admin"
	for f in "$VMSP_BASE"/run/client-*.pid; do [ -e "$f" ] && vmsp_kill_pidfile "$f" 3; done
	# the bricks' pid files are glusterd's, one line each
	for f in "$VMSP_BASE"/run/vols/"$VOL"/*.pid; do [ -e "$f" ] && vmsp_kill_pidfile "$f" 3 "$VMSP_BASE/brick"; done
	[ -e "$VMSP_BASE/run/glusterd.pid" ] && vmsp_kill_pidfile "$VMSP_BASE/run/glusterd.pid" 5
	vmsp_netns_down
	rm -rf "$VMSP_BASE"
}

up() {
	local t0 opts o kv
	vmsp_need glusterd glusterfs-server
	vmsp_need glusterfs glusterfs-client
	vmsp_need iptables iptables
	down
	t0=$(date +%s.%N)
	mkdir -p "$VMSP_BASE"/{brick,run,log,state,mnt/admin}
	vmsp_netns_up
	cat >"$VMSP_BASE/glusterd.vol" <<VOLFILE
volume management
    type mgmt/glusterd
    option working-directory $VMSP_BASE/state
    option run-directory $VMSP_BASE/run
    option glusterd-sockfile $SOCK
    option transport-type socket
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option transport.socket.listen-port 24007
    option ping-timeout 0
    option event-threads 1
end-volume
VOLFILE
	# In the foreground (-N), put in the background here, so that its pid
	# is known even if it hangs; its bricks inherit its namespace.
	setsid nsenter --net="/run/netns/$VMSP_SRV" glusterd -N -f "$VMSP_BASE/glusterd.vol" \
		-l "$VMSP_BASE/log/glusterd.log" </dev/null >>"$VMSP_BASE/log/glusterd.out" 2>&1 &
	vmsp_write_pid "$VMSP_BASE/run/glusterd.pid" $! "$VMSP_BASE/glusterd.vol"
	for _ in $(seq 150); do cli volume list >/dev/null 2>&1 && break; sleep 0.1; done
	cli volume list >/dev/null 2>&1 || vmsp_die "glusterd does not answer: see $VMSP_BASE/log/glusterd.log"
	cli volume create "$VOL" "$VMSP_SRV_IP:$VMSP_BASE/brick/$VOL" force >/dev/null
	if [ "$PROFILE" = strict ]; then
		# Every cache that would show another host's rename, unlink or
		# mtime late; strict locks: a client that lost its connection does
		# not get its locks back behind the new holder's back.
		for o in performance.stat-prefetch performance.readdir-ahead performance.quick-read \
			performance.io-cache performance.open-behind performance.write-behind \
			performance.parallel-readdir performance.nl-cache; do
			cli volume set "$VOL" "$o" off >/dev/null
		done
		cli volume set "$VOL" client.strict-locks on >/dev/null
		# A client cut off loses its locks on the server within about 5 s
		# (stock: about 43 s), so that the chat's next job does not wait
		# that long after its host's fence; its lease still stands.
		for kv in server.keepalive-time=2 server.keepalive-interval=1 server.keepalive-count=3 \
			server.tcp-user-timeout=5; do
			cli volume set "$VOL" "${kv%%=*}" "${kv#*=}" >/dev/null
		done
	fi
	cli volume set "$VOL" network.ping-timeout "${VMSP_GL_PING_TIMEOUT:-10}" >/dev/null
	for kv in ${VMSP_GL_SET:-}; do cli volume set "$VOL" "${kv%%=*}" "${kv#*=}" >/dev/null; done
	cli volume start "$VOL" >/dev/null
	# The admin mount: the file server's own side, on the server's namespace.
	VMSP_FAKETIME= mount_at "$VMSP_SRV" "$VMSP_BASE/mnt/admin" admin
	vmsp_log "up in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s (profile $PROFILE)"
	echo "admin=$VMSP_BASE/mnt/admin"
}

mount_slot() { mount_at "$VMSP_NS-$1" "$2" "$1"; }

mount_at() { # mount_at NETNS DIR NAME
	local ns=$1 dir=$2 name=$3 pre opts=() pidf
	pre=$(vmsp_faketime_prefix)
	# No attribute, name or negative cache in the kernel; and plain
	# listings (names, no attributes read per entry), which is all a poll
	# needs of a root of many names.
	[ "$PROFILE" = strict ] && opts=(--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --use-readdirp=no)
	mkdir -p "$dir" "$VMSP_BASE/run" "$VMSP_BASE/log"
	pidf=$VMSP_BASE/run/client-$name.$$.pid
	# shellcheck disable=SC2086
	nsenter --net="/run/netns/$ns" $pre glusterfs --process-name fuse --volfile-server="$VMSP_SRV_IP" \
		--volfile-id="$VOL" "${opts[@]}" --pid-file="$pidf.own" \
		--log-file="$VMSP_BASE/log/client-$name.log" "$dir"
	for _ in $(seq 100); do
		grep -q " $dir fuse.glusterfs " /proc/mounts && ls "$dir" >/dev/null 2>&1 && break
		sleep 0.1
	done
	grep -q " $dir fuse.glusterfs " /proc/mounts || vmsp_die "mount of $dir failed: see $VMSP_BASE/log/client-$name.log"
	# The client wrote its pid as its own pid namespace sees it; the file
	# kept for `down` names the mount too, so that a pid of another
	# namespace is never taken for it.
	printf '%s\n%s\n' "$(cat "$pidf.own" 2>/dev/null)" "$dir" >"$pidf"
	rm -f "$pidf.own"
}

status() {
	echo "mounts:"; grep -E " ($VMSP_BASE/|[^ ]*) fuse.glusterfs " /proc/mounts || true
	[ -S "$SOCK" ] && VMSP_CLI_TIMEOUT=5 cli volume info "$VOL" 2>/dev/null | sed 's/^/  /' || echo "glusterd: not running"
}

vmsp_main "$@"
