# shellcheck shell=bash
# lib.sh: what the engine scripts share: a private network of namespaces,
# faults on a host's link, and stopping what an earlier run left behind.
# Sourced by sshfs.sh, gluster.sh and ceph.sh; it only defines functions.
#
#   vmsp-srv   the file servers; bridge vmspbr0, $VMSP_NET.1/24
#   vmsp-h1    eth0 $VMSP_NET.11/24, a veth whose peer is a port of vmspbr0
#   vmsp-h2    $VMSP_NET.12, vmsp-h3 $VMSP_NET.13
#
# The names are the project's own, so that an operator's namespaces are
# left alone; VMSP_NS (default vmsp) is their prefix, so that two runs on
# one machine (with two VMSP_BASEs) do not meet. Nothing is added to the
# root namespace: no address, no route.
#
# A host's FUSE client runs with only its network namespace switched
# (nsenter --net): its traffic goes over that host's link alone, so a fault
# there hits that host's mount and nothing else. This kernel may lack
# sch_netem (no tc delay): loss and partitions are netfilter rules inside
# the host's namespace.

VMSP_NET=${VMSP_NET:-10.77.7}
VMSP_NS=${VMSP_NS:-vmsp}
VMSP_SRV=$VMSP_NS-srv
VMSP_BR=vmspbr0
VMSP_SLOTS=${VMSP_SLOTS:-"h1 h2 h3"}
VMSP_SRV_IP=$VMSP_NET.1

vmsp_log() { echo "[$VMSP_ENGINE $(date +%T.%3N)] $*" >&2; }
vmsp_die() { vmsp_log "$*"; exit 1; }

vmsp_slot_ip() { echo "$VMSP_NET.$((10 + ${1#h}))"; }

vmsp_check_slot() {
	case " $VMSP_SLOTS " in *" $1 "*) ;; *) vmsp_die "no host slot $1 (slots: $VMSP_SLOTS)" ;; esac
}

vmsp_need() { # vmsp_need PROGRAM PACKAGE...
	local p=$1; shift
	command -v "$p" >/dev/null || { echo "$VMSP_ENGINE: no $p: install $* (make test-deps does, as root)" >&2; exit 2; }
}

vmsp_netns_up() {
	local h n
	ip netns list | grep -qw "$VMSP_SRV" || ip netns add "$VMSP_SRV"
	ip -n "$VMSP_SRV" link set lo up
	if ! ip -n "$VMSP_SRV" link show "$VMSP_BR" >/dev/null 2>&1; then
		ip -n "$VMSP_SRV" link add "$VMSP_BR" type bridge forward_delay 0 stp_state 0
		ip -n "$VMSP_SRV" addr add "$VMSP_SRV_IP/24" dev "$VMSP_BR"
	fi
	ip -n "$VMSP_SRV" link set "$VMSP_BR" up
	for h in $VMSP_SLOTS; do
		n=$VMSP_NS-$h
		ip netns list | grep -qw "$n" || ip netns add "$n"
		ip -n "$n" link set lo up
		if ! ip -n "$n" link show eth0 >/dev/null 2>&1; then
			ip -n "$n" link add eth0 type veth peer name "vp-$h" netns "$VMSP_SRV"
			ip -n "$n" addr add "$(vmsp_slot_ip "$h")/24" dev eth0
			ip -n "$VMSP_SRV" link set "vp-$h" master "$VMSP_BR"
		fi
		ip -n "$n" link set eth0 up
		ip -n "$VMSP_SRV" link set "vp-$h" up
	done
}

vmsp_netns_down() {
	local h
	for h in $VMSP_SLOTS; do ip netns del "$VMSP_NS-$h" 2>/dev/null || true; done
	ip netns del "$VMSP_SRV" 2>/dev/null || true
}

vmsp_in_srv() { nsenter --net="/run/netns/$VMSP_SRV" "$@"; }
vmsp_in_slot() { local h=$1; shift; nsenter --net="/run/netns/$VMSP_NS-$h" "$@"; }

# Faults on a host's link, in its own namespace (its mount alone is hit).
vmsp_ipt() { local h=$1; shift; ip netns exec "$VMSP_NS-$h" iptables -w "$@"; }

vmsp_heal() {
	vmsp_ipt "$1" -F INPUT 2>/dev/null || true
	vmsp_ipt "$1" -F OUTPUT 2>/dev/null || true
}

vmsp_partition() { # every packet to and from the host dropped: a silent cut
	vmsp_heal "$1"
	vmsp_ipt "$1" -A INPUT -i eth0 -j DROP
	vmsp_ipt "$1" -A OUTPUT -o eth0 -j DROP
}

vmsp_loss() { # vmsp_loss h1 10: each direction drops 10% at random
	local p
	p=$(awk "BEGIN{printf \"%.4f\", $2/100}")
	vmsp_heal "$1"
	vmsp_ipt "$1" -A INPUT -i eth0 -m statistic --mode random --probability "$p" -j DROP
	vmsp_ipt "$1" -A OUTPUT -o eth0 -m statistic --mode random --probability "$p" -j DROP
}

vmsp_fault() { # fault SLOT partition|loss PCT|heal
	local h=$1 what=${2:-}
	vmsp_check_slot "$h"
	command -v iptables >/dev/null || vmsp_die "no iptables: install iptables (make test-deps does)"
	case $what in
	partition) vmsp_partition "$h" ;;
	loss) vmsp_loss "$h" "${3:?loss needs a percentage}" ;;
	heal) vmsp_heal "$h" ;;
	*) vmsp_die "fault $h $what: want partition, loss PCT or heal" ;;
	esac
}

# Stop a process by its pid file: TERM, KILL after $2 s. A pid that now
# belongs to another program (the file outlived a reboot) is left alone:
# its command line must hold the file's second line, or $3.
vmsp_kill_pidfile() {
	local f=$1 grace=${2:-5} p i
	[ -s "$f" ] || { rm -f "$f"; return 0; }
	p=$(head -1 "$f")
	if [ -n "$p" ] && kill -0 "$p" 2>/dev/null && vmsp_pid_is_ours "$p" "$f" "${3:-}"; then
		kill "$p" 2>/dev/null || true
		for i in $(seq $((grace * 10))); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null || true
	fi
	rm -f "/dev/shm/faketime_shm_$p" "/dev/shm/sem.faketime_sem_$p"
	rm -f "$f"
}

# Whether pid $1 still runs what pid file $2 names on its second line (or
# $3). A file that names nothing is not trusted.
vmsp_pid_is_ours() {
	local p=$1 f=$2 want
	want=$(sed -n 2p "$f")
	[ -n "$want" ] || want=${3:-}
	[ -n "$want" ] || return 1
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$want"
}

vmsp_write_pid() { # vmsp_write_pid FILE PID WORDS: the pid, and words its command line will hold
	printf '%s\n%s\n' "$2" "$3" >"$1"
}

# Unmount a FUSE mount that may hang: never wait on it. A mount whose
# server is gone is aborted through fusectl first, so that whatever waits
# on it returns, then detached.
vmsp_umount() {
	local m=$1 dev
	grep -q " $m " /proc/mounts || return 0
	dev=$(awk -v m="$m" '$5 == m { print $3 }' /proc/self/mountinfo | head -1)
	timeout 5 umount "$m" 2>/dev/null && return 0
	[ -n "$dev" ] && vmsp_fuse_abort "$dev"
	umount -l "$m" 2>/dev/null || fusermount -uz "$m" 2>/dev/null || true
}

# Hosts started through `host` (the tests', or an operator's): each is one
# process whose namespaces die with it; kill it by its recorded pid. A host
# whose first process hangs in its cut-off FUSE mount (CephFS's do, in
# uninterruptible sleep) would never die: its own FUSE connections are
# aborted once it is killed, which fails whatever waits on them.
vmsp_kill_hosts() {
	local f p devs d
	for f in "$VMSP_BASE"/run/host-*.pid; do
		[ -e "$f" ] || continue
		p=$(head -1 "$f")
		devs=""
		if kill -0 "$p" 2>/dev/null && vmsp_pid_is_ours "$p" "$f"; then
			devs=$(vmsp_private_fuse "$p")
		fi
		vmsp_kill_pidfile "$f" 2
		for d in $devs; do vmsp_fuse_abort "$d"; done
	done
	return 0
}

# The FUSE mounts (major:minor) of process $1's mount namespace that the
# caller's namespace does not have.
vmsp_private_fuse() {
	local d
	for d in $(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) ~ /^fuse/) print $3; break } }' "/proc/$1/mountinfo" 2>/dev/null); do
		awk -v d="$d" '$3 == d { found = 1 } END { exit !found }' /proc/self/mountinfo || echo "$d"
	done
}

vmsp_fuse_abort() { # vmsp_fuse_abort MAJOR:MINOR
	mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
	[ -e "/sys/fs/fuse/connections/${1#*:}/abort" ] && echo 1 >"/sys/fs/fuse/connections/${1#*:}/abort" 2>/dev/null
	return 0
}

# host SLOT DIR -- CMD...: a host of its own (pid, mount and uts
# namespaces, its hostname the slot's), on the slot's network, with the
# volume mounted at DIR inside it (mount SLOT DIR), running CMD. When CMD
# exits the volume is unmounted, so that the file servers see the client
# leave (a CephFS client that just vanishes keeps its capabilities, and
# the other hosts wait on them, until its session times out). Everything
# it started dies with it: the host's kill (a crash) is the kill of this
# one process.
vmsp_host() {
	local h=$1 dir=$2
	shift 2
	[ "${1:-}" = -- ] && shift
	vmsp_check_slot "$h"
	[ $# -gt 0 ] || vmsp_die "host $h: no command"
	mkdir -p "$dir" "$VMSP_BASE/run"
	exec nsenter --net="/run/netns/$VMSP_NS-$h" unshare --pid --fork --kill-child=SIGKILL --mount --uts \
		--mount-proc --propagation private \
		sh -c 'hostname "$VMSP_HOSTNAME" && "$VMSP_SELF" mount "$VMSP_SLOT" "$VMSP_DIR" || exit 97
echo "host $VMSP_HOSTNAME: mounted at $VMSP_DIR"
"$@"
rc=$?
umount "$VMSP_DIR" 2>/dev/null || umount -l "$VMSP_DIR"
exit $rc' host "$@"
}

# The words of env(1) that run a FUSE client under libfaketime with
# VMSP_FAKETIME's offset ("+20", "-0.5"), if it is set: the mtimes of its
# writes then move as a host's whose clock is off.
vmsp_faketime_prefix() {
	local lib
	[ -n "${VMSP_FAKETIME:-}" ] || return 0
	lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
	[ -n "$lib" ] || vmsp_die "VMSP_FAKETIME set but no libfaketime (install libfaketime)"
	echo "env LD_PRELOAD=$lib FAKETIME=$VMSP_FAKETIME FAKETIME_DONT_FAKE_MONOTONIC=1"
}

# vmsp_main is every engine script's command line; the script defines up,
# down, status and mount_slot SLOT DIR.
vmsp_main() {
	case "${1:-}" in
	up) up ;;
	down) down ;;
	status) status ;;
	mount)
		vmsp_check_slot "${2:?mount SLOT DIR}"
		mount_slot "$2" "${3:?mount SLOT DIR}"
		;;
	host)
		export VMSP_SELF VMSP_SLOT=${2:?host SLOT DIR -- CMD} VMSP_DIR=${3:?host SLOT DIR -- CMD}
		export VMSP_HOSTNAME=${VMSP_HOSTNAME:-$2}
		mkdir -p "$VMSP_BASE/run"
		printf "%s\nunshare --pid --fork --kill-child\n" $$ >"$VMSP_BASE/run/host-$VMSP_HOSTNAME.$$.pid"
		shift 3
		vmsp_host "$VMSP_SLOT" "$VMSP_DIR" "$@"
		;;
	fault) shift; vmsp_fault "$@" ;;
	*)
		echo "usage: $0 up|down|status|mount SLOT DIR|host SLOT DIR -- CMD|fault SLOT partition|loss PCT|heal" >&2
		exit 2
		;;
	esac
}
