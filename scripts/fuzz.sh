#!/bin/sh
# Runs every Fuzz* target of the module for the given time each.
# Usage: scripts/fuzz.sh DURATION
set -eu
t=${1:-3s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $f ($t)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" >/dev/null || {
			go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg"; exit 1; }
	done
done
