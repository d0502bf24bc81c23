package vmgate

import (
	"strings"
	"testing"
)

// BenchmarkCheckOneLiner decides the seed's one-liners in turn. Target:
// at least 50,000 decisions a second on one core (parsing alone is ~3 µs).
func BenchmarkCheckOneLiner(b *testing.B) {
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		Check(seedCases[n%len(seedCases)].script)
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "decisions/s")
}

// script200 is a 200-line script of the kind an agent sends: functions,
// loops, conditionals, substitutions, here-documents and read-only git.
var script200 = func() string {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\nset -euo pipefail\ncd /mnt/project\n")
	block := []string{
		`log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }`,
		`for f in $(git ls-files '*.go'); do`,
		`  if grep -q 'TODO' "$f"; then log "todo in $f"; fi`,
		`done`,
		`case "${MODE:-test}" in`,
		`  test) go test ./... 2>&1 | tail -n 20 ;;`,
		`  lint) go vet ./... || true ;;`,
		`esac`,
		`count=$(git rev-list --count HEAD)`,
		`echo "commits: $count" > /tmp/report.txt`,
		`cat <<EOF >> /tmp/report.txt`,
		`branch: $(git branch --show-current)`,
		`EOF`,
		`git diff --stat HEAD~1 | while read -r line; do echo "  $line"; done`,
		`[[ -f go.mod ]] && sed -n '1,3p' go.mod`,
		`python3 -c 'print("git add is a string")'`,
		`find . -name '*.tmp' -exec rm -f {} +`,
		`git status --short | awk '{print $2}' | xargs -r ls -la`,
		`timeout 10 sudo -u dev env LC_ALL=C git log --oneline -5`,
		`x=$(( count + 1 )); echo "$x"`,
	}
	for i := 0; b.Len() >= 0 && strings.Count(b.String(), "\n") < 200; i++ {
		b.WriteString(block[i%len(block)])
		b.WriteByte('\n')
	}
	return b.String()
}()

// BenchmarkCheck200Lines decides a 200-line script. Target: under 1 ms.
func BenchmarkCheck200Lines(b *testing.B) {
	if v := Check(script200); !v.Allowed {
		b.Fatalf("the benchmark script is refused: %s", v.Message)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		Check(script200)
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkCheckWorst decides the costliest script the limits let
// through whole: a pipe of MaxNodes one-letter commands, walked to its
// end (hostile in TestDecisionCeiling). Bound: about a second, and what
// the decision reserves (cost).
func BenchmarkCheckWorst(b *testing.B) {
	src := hostile["a pipe of MaxNodes"].script()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		Check(src)
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "decisions/s")
}
