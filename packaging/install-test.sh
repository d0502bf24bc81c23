#!/bin/bash
# The package on this machine, as an operator meets it (README, "Install"):
# apt-get install, the user, the spool's modes, the files, `import vmspool`
# with Debian's python3; a job run through the installed binaries; an
# upgrade over it; then remove and purge, after each of which the spool
# and its jobs must still be there.
#
# Usage: packaging/install-test.sh build/vmspool_<version>_<arch>.deb
# (make deb-install-test). It needs root and apt-get, and installs on
# this machine: CI runs it (.ci/run). It refuses to run where vmspool is
# installed already, and at the end removes the user and the spool it
# created, so that a second run starts as the first did.
#
# No systemd runs here as pid 1 (the units are tested under a booted
# systemd by TestSystemd, in packaging/): spoold is started by hand, as
# the vmspool user.
set -euo pipefail

deb=${1:?usage: install-test.sh PACKAGE.deb}
case $deb in /*) ;; *) deb=$PWD/$deb ;; esac
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "install-test: skipped: needs root and apt-get (CI runs it as root)"
	exit 0
fi
if dpkg-query -W -f='${Status}' vmspool 2>/dev/null | grep -q ' installed$'; then
	echo "install-test: vmspool is installed on this machine already; remove it first (apt-get purge vmspool)" >&2
	exit 1
fi

spool=/var/spool/vm
passed=0 failed=0
check() { # check WHAT COMMAND...: a check, counted
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "install-test: FAIL: $what ($*)" >&2
	fi
}
as_vmspool() { runuser -u vmspool -- env -i PATH=/usr/bin:/bin HOME=$spool SPOOL_DIR=$spool "$@"; }
apt() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }

had_user=; getent passwd vmspool >/dev/null && had_user=1
had_spool=; [ -e $spool ] && had_spool=1
had_logs=; [ -e /var/log/vmspool ] && had_logs=1
work=$(mktemp -d)
spoold_pid=
cleanup() {
	[ -z "$spoold_pid" ] || kill "$spoold_pid" 2>/dev/null || true
	apt purge vmspool >/dev/null 2>&1 || true
	[ -n "$had_spool" ] || rm -rf $spool
	[ -n "$had_logs" ] || rm -rf /var/log/vmspool
	userdel vmspool-member-test 2>/dev/null || true
	[ -n "$had_user" ] || { userdel vmspool 2>/dev/null || true; groupdel vmspool 2>/dev/null || true; }
	rm -rf "$work"
}
trap cleanup EXIT

# --no-install-recommends: cron is not on CI's machine, and the checks
# need nothing the package recommends (python3 and logrotate are there).
echo "install-test: apt-get install $deb"
apt install --no-install-recommends "$deb" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
version=$(dpkg-query -W -f='${Version}' vmspool)

check "the user vmspool, home $spool, no shell" \
	sh -c "getent passwd vmspool | grep -q ':$spool:/usr/sbin/nologin\$'"
check "the group vmspool" getent group vmspool
for dir in $spool /var/log/vmspool; do
	check "$dir is 0750 vmspool:vmspool" sh -c "[ \"\$(stat -c '%a %U %G' $dir)\" = '750 vmspool vmspool' ]"
done
check "the install says nothing was started" grep -q 'no daemon was started' "$work/install.log"
for f in /usr/bin/spool /usr/bin/spoold /usr/bin/watchd /usr/bin/vmgate; do
	check "$f 0755 root" sh -c "[ \"\$(stat -c '%a %U' $f)\" = '755 root' ] && $f --version"
done
for f in /usr/lib/systemd/system/spoold.service /usr/lib/systemd/system/watchd.service \
	/usr/lib/systemd/system/vmgate.service /usr/lib/sysusers.d/vmspool.conf \
	/usr/lib/tmpfiles.d/vmspool.conf /etc/cron.d/vmspool /etc/logrotate.d/vmspool \
	/usr/lib/python3/dist-packages/vmspool.py /usr/share/vmspool/openwebui/vm_agent.py \
	/usr/share/vmspool/openwebui/vm_agent_progress.py /usr/share/doc/vmspool/copyright \
	/usr/share/vmspool/grafana/vmspool.json /usr/share/vmspool/prometheus/vmspool.rules.yml \
	/usr/share/doc/vmspool/changelog.gz /usr/share/doc/vmspool/operations.md; do
	check "$f 0644" sh -c "[ \"\$(stat -c '%a' $f)\" = 644 ]"
done
for c in spool spoold watchd vmgate; do
	check "man page of $c, from its -h" sh -c "zcat /usr/share/man/man1/$c.1.gz | grep -q '^\\.SH SYNOPSIS'"
done
for sub in $(/usr/bin/spool -h | awk '/^  [a-z]/ { print $1 }' | sort -u); do
	check "spool(1) has spool $sub" sh -c "zcat /usr/share/man/man1/spool.1.gz | grep -q '^\\.SS spool $sub\$'"
done
check "the units run /usr/bin" grep -q '^ExecStart=/usr/bin/spoold ' /usr/lib/systemd/system/spoold.service
if command -v systemd-analyze >/dev/null; then
	check "systemd-analyze verify of the installed units" sh -c \
		'out=$(systemd-analyze verify spoold.service watchd.service vmgate.service 2>&1) && [ -z "$out" ]'
fi
check "conffiles: cron and logrotate" sh -c \
	"dpkg-query -W -f='\${Conffiles}' vmspool | grep -q /etc/cron.d/vmspool && dpkg-query -W -f='\${Conffiles}' vmspool | grep -q /etc/logrotate.d/vmspool"
check "import vmspool with Debian's python3, from dist-packages" sh -c \
	"cd / && env -i /usr/bin/python3 -c 'import vmspool; assert vmspool.__file__ == \"/usr/lib/python3/dist-packages/vmspool.py\", vmspool.__file__'"
if command -v logrotate >/dev/null || [ -x /usr/sbin/logrotate ]; then
	check "logrotate reads its file" sh -c "PATH=\$PATH:/usr/sbin logrotate -d /etc/logrotate.d/vmspool"
fi
check "vmgate refuses a git write" sh -c '! /usr/bin/vmgate check -c "git push"'

# A job through the installed binaries: spoold as the vmspool user, a
# submit from the shell and one from Python, each followed to its end.
# setpriv execs spoold itself (runuser would stay its parent, and keep
# the signal that should stop it).
setpriv --reuid=vmspool --regid=vmspool --init-groups env -i PATH=/usr/bin:/bin HOME=$spool \
	SPOOL_DIR=$spool /usr/bin/spoold --workers 2 >"$work/spoold.log" 2>&1 &
spoold_pid=$!
job=$(as_vmspool /usr/bin/spool submit --chat pkg-ci -- sh -c 'spool say hello from the package; echo out')
check "watchd follow relays the job to its end" sh -c \
	"runuser -u vmspool -- env -i PATH=/usr/bin:/bin SPOOL_DIR=$spool /usr/bin/watchd follow --chat pkg-ci --job $job --timeout 60s | grep -q 'hello from the package'"
check "the job is done" test -f "$spool/$job.done"
check "its log" grep -qx out "$spool/$job.log"
pyjob=$(as_vmspool /usr/bin/python3 -c 'import vmspool; print(vmspool.submit("pkg-ci-py", argv=["true"], spool="/var/spool/vm"))')
check "a job submitted from Python runs" sh -c \
	"runuser -u vmspool -- env -i PATH=/usr/bin:/bin SPOOL_DIR=$spool /usr/bin/watchd follow --chat pkg-ci-py --job $pyjob --timeout 60s"
check "spool ls lists both done" sh -c "as() { runuser -u vmspool -- env -i SPOOL_DIR=$spool /usr/bin/spool ls --state done; }; as | grep -q $job && as | grep -q $pyjob"
# The system spool is found with no SPOOL_DIR by the service user and by
# a member of its group (README, "Where the spool is").
check "spool ls as vmspool, no SPOOL_DIR" sh -c "runuser -u vmspool -- env -i PATH=/usr/bin:/bin HOME=$spool /usr/bin/spool ls | grep -q $job"
useradd --no-create-home --home-dir "$work/member" --groups vmspool vmspool-member-test 2>/dev/null || true
mkdir -p "$work/member" && chown vmspool-member-test "$work/member" && chmod 755 "$work"
check "spool ls as a member of group vmspool, no SPOOL_DIR" sh -c "runuser -u vmspool-member-test -- env -i PATH=/usr/bin:/bin HOME=$work/member /usr/bin/spool ls | grep -q $job"
userdel vmspool-member-test 2>/dev/null || true
kill -TERM "$spoold_pid"
check "spoold stops on SIGTERM, exit 0" wait "$spoold_pid"
spoold_pid=
check "the job files are the vmspool user's" sh -c "[ \"\$(stat -c %U $spool/$job.done)\" = vmspool ]"

# An upgrade to a later version of the same package (repacked with dpkg-deb).
mkdir "$work/up"
dpkg-deb -R "$deb" "$work/up/pkg"
sed -i "s/^Version: .*/Version: $version+up1/" "$work/up/pkg/DEBIAN/control"
dpkg-deb -Zgzip -z1 -b "$work/up/pkg" "$work/up/vmspool_up.deb" >/dev/null # not xz: 18 s here
check "upgrade" apt install --no-install-recommends "$work/up/vmspool_up.deb"
check "the upgrade is installed" sh -c "[ \"\$(dpkg-query -W -f='\${Version}' vmspool)\" = '$version+up1' ]"
check "the upgrade kept the jobs" test -f "$spool/$job.done" -a -f "$spool/$job.json" -a -f "$spool/$pyjob.done"

# Remove: the binaries go, the spool and the conffiles stay.
check "apt-get remove" apt remove vmspool
check "remove took the binaries" test ! -e /usr/bin/spoold
check "remove kept the spool and its jobs" test -f "$spool/$job.done" -a -f "$spool/$pyjob.done"
check "remove kept the conffiles" test -f /etc/cron.d/vmspool
check "remove kept the user" getent passwd vmspool

# Purge: the conffiles go; the spool, its jobs and the user stay, and it says so.
apt purge vmspool >"$work/purge.log" 2>&1 || failed=$((failed + 1))
check "purge took the conffiles" test ! -e /etc/cron.d/vmspool -a ! -e /etc/logrotate.d/vmspool
check "purge kept the spool and its jobs" test -f "$spool/$job.done" -a -f "$spool/$job.log" -a -f "$spool/$pyjob.done"
check "purge kept the spool's owner and mode" sh -c "[ \"\$(stat -c '%a %U %G' $spool)\" = '750 vmspool vmspool' ]"
check "purge says where the spool is" grep -q "Kept.*the spool $spool" "$work/purge.log"
check "purged" sh -c "! dpkg-query -W -f='\${Status}' vmspool 2>/dev/null | grep -q ' installed\$'"

# Installed again over the kept spool: its jobs are there as they were.
check "install again over the kept spool" apt install --no-install-recommends "$deb"
check "the old jobs are listed" sh -c "runuser -u vmspool -- env -i SPOOL_DIR=$spool /usr/bin/spool ls | grep -q $job"
check "purge again" apt purge vmspool

if [ "$failed" -gt 0 ]; then
	echo "install-test: the last spoold's log:" >&2
	cat "$work/spoold.log" >&2
fi
echo "install-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
