package vmgate

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// hostile are scripts made to cost the gate memory, stack or time: each
// shape of the reviews, at the size that cost the most. want is the
// verdict; "" accepts any refusal (a budget may run out first, or not).
var hostile = map[string]struct {
	script func() string
	want   string
}{
	// Hardening review 2, item 8: 1 MiB of ! in a test held 836 MB of stack.
	"test of !":   {func() string { return "[[ " + strings.Repeat("! ", (MaxScript-10)/2) + "a ]]" }, "undecidable"},
	"test of &&":  {func() string { return "[[ " + strings.Repeat("a && ", (MaxScript-10)/5) + "a ]]" }, "undecidable"},
	"arith of !":  {func() string { return "(( " + strings.Repeat("!", MaxScript-10) + "1 ))" }, "undecidable"},
	"arith of a=": {func() string { return "echo $((" + strings.Repeat("a=", (MaxScript-10)/2) + "1))" }, "undecidable"},
	"arith of ?:": {func() string { return "echo $((" + strings.Repeat("1?1:", (MaxScript-10)/4) + "1))" }, "undecidable"},
	"slice of !":  {func() string { return "echo ${a: " + strings.Repeat("!", MaxScript-20) + "1}" }, "undecidable"},
	"let of -~":   {func() string { return "let " + strings.Repeat("-~", (MaxScript-10)/2) + "1" }, "undecidable"},
	"time chain":  {func() string { return strings.Repeat("time ", (MaxScript-10)/5) + "a" }, "undecidable"},
	"f() chain":   {func() string { return strings.Repeat("f() ", (MaxScript-10)/4) + "{ a; }" }, "undecidable"},
	"parens 300KB": {func() string {
		return strings.Repeat("(", 150_000) + "true" + strings.Repeat(")", 150_000)
	}, "undecidable"},
	// A here-document announced inside arithmetic is none: its "body"
	// was skipped by the scan, and 600 KB of ( behind it reached the parser.
	"<< in arithmetic": {func() string {
		return "echo $((1<<2))\n" + strings.Repeat("(", 300_000) + "true" + strings.Repeat(")", 300_000) + "\n"
	}, "undecidable"},
	// echo fi closed the frame of an if the parser keeps open.
	"echo fi": {func() string { return strings.Repeat("if a; then echo fi; ", 40_000) }, "undecidable"},
	// Strings run as code were parsed without the scan.
	"bash -c of (": {func() string {
		return "bash -c '" + strings.Repeat("(", 300_000) + "true" + strings.Repeat(")", 300_000) + "'"
	}, "undecidable"},
	"bash of a quoted here-document of (": {func() string {
		return "bash <<'EOF'\n" + strings.Repeat("(", 300_000) + "true" + strings.Repeat(")", 300_000) + "\nEOF\n"
	}, "undecidable"},
	// The densest trees the scan lets through, walked whole.
	"a pipe of MaxNodes":  {func() string { return strings.Repeat("a|", MaxNodes/2-2) + "a" }, "allow"},
	"a chain of MaxNodes": {func() string { return strings.Repeat("a&&", MaxNodes/3-2) + "a" }, "allow"},
	"cats piped":          {func() string { return strings.Repeat("cat|", MaxNodes/2-2) + "sh" }, ""},
	"words":               {func() string { return "echo " + strings.Repeat("$a ", MaxNodes/2-2) }, "allow"},
	"too many nodes":      {func() string { return strings.Repeat("a|", MaxScript/2-8) + "a" }, "undecidable"},
	// Values that double: 1.5 GB, 3.3 GB and 1 GB before the memory
	// budget, from scripts of a few hundred KB.
	"variables of 64 KiB": {func() string {
		var b strings.Builder
		b.WriteString("a=" + strings.Repeat("x", 32768) + "\nb=$a$a\n")
		for i := range 19000 {
			fmt.Fprintf(&b, "v%d=$b\n", i)
		}
		return b.String()
	}, "undecidable"},
	"files of 192 KiB": {func() string {
		var b strings.Builder
		b.WriteString("a=" + strings.Repeat("x", 32768) + "\nb=$a$a\n")
		for i := range 19000 {
			fmt.Fprintf(&b, "echo $b$b$b > f%d\n", i)
		}
		return b.String()
	}, "undecidable"},
	"arguments of 256 KiB": {func() string {
		return "a=" + strings.Repeat("x", 32768) + "\nb=$a$a\necho " + strings.Repeat("$b$b$b$b ", 2000)
	}, "undecidable"},
	// Each branch that assigns copies every variable: 12 GB allocated.
	"branches copying variables": {func() string {
		var b strings.Builder
		for i := range 8000 {
			fmt.Fprintf(&b, "v%d=1\n", i)
		}
		b.WriteString(strings.Repeat("if a; then x=1; fi\n", 4000))
		return b.String()
	}, "undecidable"},
	// A string of 64 KiB of code run again and again.
	"eval of a large string": {func() string {
		return "c='" + strings.Repeat("a ", 32000) + "'\n" + strings.Repeat("eval \"$c\"\n", 5000)
	}, "undecidable"},
	// Calls: each calls the next twice (2^30 calls), and a recursion
	// whose words change at every call.
	"calls doubling": {func() string {
		var b strings.Builder
		b.WriteString("f0() { git status; }\n")
		for i := 1; i < 30; i++ {
			fmt.Fprintf(&b, "f%d() { f%d; f%d; }\n", i, i-1, i-1)
		}
		b.WriteString("f29\n")
		return b.String()
	}, "undecidable"},
	"recursion with new words": {func() string { return `f() { f "x$1"; }; f` }, "undecidable"},
}

// TestDecisionCeiling decides each hostile script in a process of its own
// (one for them all: a process start is a second under the race
// detector) and reads what each decision took: every byte it allocated,
// and the stack the process grew. Each stays under what the decision
// reserves before its parse (cost, budget.go), which is what bounds the
// memory of every decision a daemon makes at once (maxInFlight).
func TestDecisionCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the decisions run in a process of their own")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDecisionCeilingChild$")
	cmd.Env = append(os.Environ(), "VMGATE_HOSTILE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the decisions' process: %v\n%s", err, out)
	}
	reports := map[string]ceilingReport{}
	for _, line := range strings.Split(string(out), "\n") {
		var r ceilingReport
		if rest, ok := strings.CutPrefix(line, "REPORT "); ok && json.Unmarshal([]byte(rest), &r) == nil {
			reports[r.Name] = r
		}
	}
	for _, name := range hostileNames() {
		t.Run(name, func(t *testing.T) {
			r, ok := reports[name]
			if !ok {
				t.Fatalf("no report:\n%s", out)
			}
			h := hostile[name]
			if h.want != "" && r.Verdict != h.want || h.want == "" && r.Verdict == "allow" {
				t.Errorf("verdict %s (%s), want %s", r.Verdict, r.Why, h.want)
			}
			if took := r.Alloc + r.Stack; took > r.Cost {
				t.Errorf("took %d MiB (%d allocated, %d of stack), more than the %d MiB it reserved", took>>20, r.Alloc>>20, r.Stack>>20, r.Cost>>20)
			}
			// Time is measured, not asserted (make bench); a budget that
			// took minutes would fail the run's timeout.
			t.Logf("%s in %v: %d MiB allocated, %d MiB of stack, %d MiB reserved %s", r.Verdict, time.Duration(r.Nanos), r.Alloc>>20, r.Stack>>20, r.Cost>>20, r.Why)
		})
	}
}

func hostileNames() []string {
	names := make([]string, 0, len(hostile))
	for name := range hostile {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

type ceilingReport struct {
	Name, Verdict, Why string
	Alloc, Stack, Cost int64
	Nanos              int64
}

// TestDecisionCeilingChild is TestDecisionCeiling's process. The stack is
// what the process took from the system for stacks, which only grows: an
// upper bound of each decision's.
func TestDecisionCeilingChild(t *testing.T) {
	if os.Getenv("VMGATE_HOSTILE") == "" {
		t.Skip("run by TestDecisionCeiling")
	}
	for _, name := range hostileNames() {
		src := hostile[name].script()
		_, sc := tooBig(src)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		began := time.Now()
		v := Check(src)
		took := time.Since(began)
		runtime.ReadMemStats(&after)
		why := ""
		if i := strings.Index(v.Message, "writes to git ("); i >= 0 {
			why = strings.SplitN(v.Message[i+len("writes to git "):], ". Nothing ran", 2)[0]
		}
		r := ceilingReport{Name: name, Verdict: want(v), Why: why,
			Alloc: int64(after.TotalAlloc - before.TotalAlloc),
			Stack: int64(after.StackSys),
			Cost:  cost(len(src), sc.nodes),
			Nanos: int64(took)}
		b, _ := json.Marshal(r)
		fmt.Printf("\nREPORT %s\n", b)
	}
}

// The largest decision the limits let through fits the pool beside four
// small ones: a decision never waits for more than the pool can give, and
// a large one does not stop the ordinary ones.
func TestCostFitsThePool(t *testing.T) {
	large, small := cost(MaxScript, MaxNodes), cost(1000, 100)
	if large+4*small > maxInFlight {
		t.Errorf("the largest decision reserves %d MiB and a small one %d: more than the pool's %d", large>>20, small>>20, maxInFlight>>20)
	}
}
