#!/bin/sh
# Runs every Fuzz* target of the module for the given time each.
# Usage: scripts/fuzz.sh DURATION
#
# A failure the fuzzer found is written to the package's testdata/fuzz/
# and replayed as a seed by every later run: it fails again. A run that
# fails and then passes when run again found nothing it could keep (the
# engine's own trouble on a loaded machine: a worker that did not answer
# in time); it is reported, with its output, and does not fail the run.
set -eu
t=${1:-3s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $f ($t)"
		if ! go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" >"$out" 2>&1; then
			echo "fuzz $pkg $f failed; its output:"
			grep -v '^fuzz: elapsed' "$out" || true
			echo "fuzz $pkg $f: running it again"
			go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" || exit 1
			echo "fuzz $pkg $f: passed when run again, and kept no failing input: not a failure of the code"
		fi
	done
done
