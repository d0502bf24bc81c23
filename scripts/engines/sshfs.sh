#!/bin/bash
# sshfs.sh: a directory exported by an sshd (sftp) in the namespace
# vmsp-srv, mounted with sshfs by each host through its own link (lib.sh).
# A developer's tool rather than a site's filesystem, but the cheapest way
# to see many hosts on one machine; docs/operations.md ("sshfs") says what
# was proven on it and with which options.
#
#   sshfs.sh up | down | status | mount SLOT DIR | host SLOT DIR -- CMD
#   sshfs.sh fault SLOT partition|loss PCT|heal
#
# `up` prints admin=PATH: the exported directory itself, the file server's
# own view. Environment:
#   VMSP_BASE         keys, config, the export (/run/vmspool-engines/sshfs)
#   VMSP_SSHFS_OPTS   the mount options (default the recommended ones:
#                     dir_cache=no,entry_timeout=0.2,attr_timeout=0.2;
#                     "stock" for sshfs's own defaults)
#   VMSP_HOSTNAME     as in gluster.sh
# VMSP_FAKETIME is not heeded here: the sftp server, not the client, sets
# the mtime of a write.
set -euo pipefail
VMSP_ENGINE=sshfs
VMSP_SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
. "$(dirname "$VMSP_SELF")/lib.sh"
VMSP_BASE=${VMSP_BASE:-/run/vmspool-engines/sshfs}
PORT=2222
RECOMMENDED=dir_cache=no,entry_timeout=0.2,attr_timeout=0.2

down() {
	local f
	vmsp_kill_hosts
	for f in "$VMSP_BASE"/run/client-*.pid "$VMSP_BASE"/run/sshd.pid; do [ -e "$f" ] && vmsp_kill_pidfile "$f" 3; done
	vmsp_netns_down
	rm -rf "$VMSP_BASE"
}

up() {
	local t0 k
	vmsp_need /usr/sbin/sshd openssh-server
	vmsp_need sshfs sshfs
	vmsp_need iptables iptables
	down
	t0=$(date +%s.%N)
	mkdir -p "$VMSP_BASE"/{run,log,keys,export}
	chmod 700 "$VMSP_BASE/keys"
	for k in host user; do ssh-keygen -q -t ed25519 -N "" -f "$VMSP_BASE/keys/$k"; done
	cp "$VMSP_BASE/keys/user.pub" "$VMSP_BASE/keys/authorized_keys"
	vmsp_netns_up
	cat >"$VMSP_BASE/sshd_config" <<CONF
ListenAddress $VMSP_SRV_IP
Port $PORT
HostKey $VMSP_BASE/keys/host
AuthorizedKeysFile $VMSP_BASE/keys/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
PidFile none
LogLevel ERROR
CONF
	mkdir -p /run/sshd # sshd's privilege separation directory
	setsid nsenter --net="/run/netns/$VMSP_SRV" /usr/sbin/sshd -D -e -f "$VMSP_BASE/sshd_config" \
		</dev/null >>"$VMSP_BASE/log/sshd.out" 2>&1 &
	vmsp_write_pid "$VMSP_BASE/run/sshd.pid" $! "$VMSP_BASE/sshd_config"
	for _ in $(seq 100); do
		vmsp_in_srv bash -c "exec 3<>/dev/tcp/$VMSP_SRV_IP/$PORT" 2>/dev/null && break
		sleep 0.1
	done
	vmsp_in_srv bash -c "exec 3<>/dev/tcp/$VMSP_SRV_IP/$PORT" 2>/dev/null || vmsp_die "sshd does not listen: see $VMSP_BASE/log/sshd.out"
	vmsp_log "up in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
	echo "admin=$VMSP_BASE/export"
}

mount_slot() { # mount_slot SLOT DIR
	local h=$1 dir=$2 o=${VMSP_SSHFS_OPTS:-$RECOMMENDED}
	[ "$o" = stock ] && o=""
	mkdir -p "$dir" "$VMSP_BASE/run"
	vmsp_in_slot "$h" sshfs -o "IdentityFile=$VMSP_BASE/keys/user,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR,port=$PORT${o:+,$o}" \
		"root@$VMSP_SRV_IP:$VMSP_BASE/export" "$dir"
	grep -q " $dir fuse.sshfs " /proc/mounts || vmsp_die "mount of $dir failed"
}

status() {
	echo "mounts:"; grep " fuse.sshfs " /proc/mounts || true
	[ -s "$VMSP_BASE/run/sshd.pid" ] && kill -0 "$(head -1 "$VMSP_BASE/run/sshd.pid")" 2>/dev/null &&
		echo "sshd: $VMSP_SRV_IP:$PORT, export $VMSP_BASE/export" || echo "sshd: not running"
}

vmsp_main "$@"
