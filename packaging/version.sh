#!/bin/sh
# Prints the Debian package's version, derived from `git describe`:
#   at a tag vX.Y.Z                X.Y.Z
#   N commits past it              X.Y.Z+N.gSHA (after X.Y.Z, before the next tag)
#   no v* tag yet                  0.0~gitYYYYMMDDhhmmss.SHA, the commit's time
#                                  (UTC), so that later commits sort later
# and +dirty (.dirty after ~git) when the tree has uncommitted changes. A
# tag's own - becomes ~ (v1.2.0-rc1: 1.2.0~rc1, which sorts before 1.2.0).
# Outside a git checkout: 0.0~unknown.
set -eu
cd "$(dirname "$0")/.."
if d=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	dirty=
	case $d in *-dirty) dirty=+dirty; d=${d%-dirty} ;; esac
	past=$(printf '%s\n' "$d" | sed -n 's/^.*-\([0-9][0-9]*\)-g\([0-9a-f][0-9a-f]*\)$/\1.g\2/p')
	[ -z "$past" ] || d=${d%-*-g*}
	v=$(printf '%s\n' "${d#v}" | tr - '~')
	if [ -n "$past" ]; then v="$v+$past"; dirty=${dirty:+.dirty}; fi
	printf '%s%s\n' "$v" "$dirty"
elif sha=$(git rev-parse --short=12 HEAD 2>/dev/null); then
	t=$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)
	dirty=
	git diff --quiet HEAD 2>/dev/null || dirty=.dirty
	printf '0.0~git%s.%s%s\n' "$t" "$sha" "$dirty"
else
	echo 0.0~unknown
fi
