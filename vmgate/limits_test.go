package vmgate

import (
	"runtime"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// Deep nesting crashed the parser's goroutine stack (a fatal error, not a
// panic: the daemon died, and died again on every retry). Each shape here
// is refused as undecidable, quickly, whatever its depth.
func TestNestingRefused(t *testing.T) {
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	cases := map[string]string{
		"subshells 300KB":  deep("(", "git status", ")", 150_000),
		"command subst":    "echo " + deep("$(", "true", ")", 5000),
		"quoted subst":     "echo " + deep(`"$(`, "true", `)"`, 5000),
		"braces":           deep("{ ", "true; ", "}; ", 5000),
		"arith":            "echo $((" + deep("(", "1", ")", 5000) + "))",
		"param":            "echo " + deep("${a:-", "x", "}", 5000),
		"backquote in dq":  "echo " + deep("\"`", "true", "`\"", 2000),
		"ifs":              deep("if true; then ", "true; ", "fi; ", 5000),
		"whiles":           deep("while true; do ", "true; ", "done; ", 5000),
		"case patterns":    deep("$(case a in a) ", "true", " ;; esac)", 5000),
		"heredoc unquoted": "cat <<EOF\n" + deep("$(", "true", ")", 5000) + "\nEOF\n",
		"too large":        strings.Repeat("echo hello world\n", MaxScript/17+1),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			v := Check(src)
			if v.Allowed || v.Reason == nil || *v.Reason != string(ReasonUndecidable) {
				t.Fatalf("want undecidable, got %+v", v)
			}
		})
	}
}

// What does not nest must not be measured as if it did: prose in
// here-documents, comments and single quotes is no wall.
func TestNestingNotAWall(t *testing.T) {
	prose := strings.Repeat("if you want it (or not: see [1] {x}\n", 1000)
	cases := map[string]string{
		"quoted heredoc":   "cat <<'EOF' > notes.md\n" + prose + "EOF\ngit status\n",
		"unquoted heredoc": "cat <<EOF > notes.md\n" + prose + "EOF\n",
		"dash heredoc":     "cat <<-EOF\n\t" + prose + "\tEOF\n",
		"two heredocs":     "cat <<A <<'B'\n" + prose + "A\n" + prose + "B\necho ok\n",
		"comments":         strings.Repeat("# if (this) { that [\n", 1000) + "echo done\n",
		"single quotes":    "echo '" + strings.Repeat("((((if ", 1000) + "'\n",
		"many flat blocks": strings.Repeat("if true; then (echo $(date)); fi\n", 1000),
		"case with parens": strings.Repeat("case $x in (a) echo a;; b) echo b;; esac\n", 1000),
		"nested 50 levels": strings.Repeat("(", 50) + "true" + strings.Repeat(")", 50),
		"while read loops": strings.Repeat("while read l; do for x in $l; do echo \"$(echo ${x})\"; done; done < f\n", 500),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if d, _ := nesting(src); d > MaxNesting {
				t.Fatalf("nesting %d > %d", d, MaxNesting)
			}
			if v := Check(src); !v.Allowed {
				t.Fatalf("refused: %s", v.Message)
			}
		})
	}
}

func TestNestingDepth(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{"true", 0},
		{"(true)", 1},
		{"echo $(echo $(true))", 2},
		{`echo "$(echo "$(true)")"`, 4},
		{"if a; then b; fi", 1},
		{"if a; then if b; then c; fi; fi", 2},
		{"echo 'if ((('", 0},
		{"# ((((\ntrue", 0},
	} {
		if got, _ := nesting(c.src); got != c.want {
			t.Errorf("nesting(%q) = %d, want %d", c.src, got, c.want)
		}
	}
}

// Every construct the parser recurses for is a level of the scan, so that
// no text reaches the parser that nests past MaxNesting: the operators of
// tests and arithmetic, the commands that start a command (time, coproc,
// name()), and the frames a word such as fi or done=1 cannot close.
func TestNestingCountsRecursion(t *testing.T) {
	const n = 300
	cases := map[string]string{
		"test !":             "[[ " + strings.Repeat("! ", n) + "a ]]",
		"test &&":            "[[ " + strings.Repeat("a && ", n) + "a ]]",
		"test ||":            "[[ " + strings.Repeat("a || ", n) + "a ]]",
		"test after time -p": "time -p [[ " + strings.Repeat("! ", n) + "a ]]",
		"test in a function": "function f [[ " + strings.Repeat("! ", n) + "a ]]",
		"arith !":            "(( " + strings.Repeat("!", n) + "1 ))",
		"arith -":            "echo $(( " + strings.Repeat("- ", n) + "1 ))",
		"arith a=":           "echo $((" + strings.Repeat("a=", n) + "1))",
		"arith ?:":           "echo $((" + strings.Repeat("1?", n) + "1" + strings.Repeat(":1", n) + "))",
		"arith **":           "echo $((" + strings.Repeat("2**", n) + "1))",
		"$[ ]":               "echo $[" + strings.Repeat("-~", n) + "1]",
		"for (( ))":          "for ((" + strings.Repeat("-~", n) + "1;;)); do :; done",
		"let":                "let " + strings.Repeat("-~", n) + "1",
		"index":              "a[" + strings.Repeat("-~", n) + "1]=b",
		"index in ${}":       "echo ${a[" + strings.Repeat("-~", n) + "1]}",
		"array index":        "a=([" + strings.Repeat("-~", n) + "1]=b)",
		"slice":              "echo ${a: " + strings.Repeat("!", n) + "1}",
		"slice -~":           "echo ${a: " + strings.Repeat("-~", n) + "1}",
		"slice length":       "echo ${a:1:" + strings.Repeat("-~", n) + "1}",
		"time":               strings.Repeat("time ", n) + "a",
		"time -p":            strings.Repeat("time -p ", n) + "a",
		"coproc":             strings.Repeat("coproc ", n) + "a",
		"name()":             strings.Repeat("f() ", n) + "{ a; }",
		"name ( )":           strings.Repeat("f ( ) ", n) + "{ a; }",
		"echo fi":            strings.Repeat("if a; then echo fi; ", n),
		"done=1":             strings.Repeat("while a; do done=1; ", n),
		// << in arithmetic is a shift: no here-document's body to skip.
		"<< in arithmetic": "echo $((1<<2))\n" + strings.Repeat("(", n) + "true" + strings.Repeat(")", n) + "\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if d, _ := nesting(src); d <= MaxNesting {
				t.Errorf("nesting %d, want more than %d", d, MaxNesting)
			}
			if v := Check(src); want(v) != "undecidable" {
				t.Errorf("Check = %s, want undecidable", want(v))
			}
		})
	}
}

// Strings run as code are held to the same limits: single quotes and
// quoted here-documents are text to the script's scan, and 600 KB of (
// in one was a fatal stack overflow once parsed again.
func TestNestingOfCode(t *testing.T) {
	deep := strings.Repeat("(", 150_000) + "true" + strings.Repeat(")", 150_000)
	shallow := strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300)
	for _, src := range []string{
		"bash -c '" + deep + "'",
		"bash <<'EOF'\n" + deep + "\nEOF\n",
		"eval '" + deep + "'",
		"x='" + shallow + "'; sh -c \"$x\"",
		"bash -c 'eval \"$1\"' _ '" + shallow + "'",
		"sh -c 'git status; " + strings.Repeat("time ", 1000) + "true'",
	} {
		v := Check(src)
		if want(v) != "undecidable" || !strings.Contains(v.Message, "in a string run as code") {
			t.Errorf("Check(%.40q...) = %s: %s", src, want(v), v.Message)
		}
	}
}

// The counts are upper bounds, not walls: operators, time and
// functions as scripts use them pass.
func TestNestingCountsNotAWall(t *testing.T) {
	cases := map[string]string{
		"tests":       strings.Repeat("[[ -f a && ! -d b || -n \"$c\" ]] && echo ok\n", 500),
		"arithmetic":  strings.Repeat("echo $(( (a + b) * c - d / 2 ** e % 3 )); (( i++ )); let j=i+1\n", 500),
		"for (( ))":   strings.Repeat("for ((i = 0; i < 10; i++)); do echo $i; done\n", 300),
		"slices":      strings.Repeat("echo ${a:1:2} ${a: -1} ${b:-x-y-z} ${#c} ${d[i+1]}\n", 500),
		"time":        strings.Repeat("time make; time -p go test\n", 500),
		"functions":   strings.Repeat("f() { g; }; function h { f; }\n", 500),
		"words":       strings.Repeat("echo fi done esac then; done=1 fi=2\n", 500),
		"shifts":      strings.Repeat("echo $((1 << 2)) $((8 >> 1))\n", 500) + "cat <<EOF\nbody\nEOF\n",
		"globs":       strings.Repeat("ls file[0-9].txt *.[ch] [!a]*\n", 500),
		"arrays":      strings.Repeat("a=([0]=x [1]=y); b+=(z)\n", 500),
		"! commands":  strings.Repeat("! grep -q x f || echo \"hi!\"\n", 500),
		"long test":   "[[ " + strings.Repeat("-n a && ", 90) + "-n b ]]",
		"long arith":  "echo $((" + strings.Repeat("1+", 150) + "1))",
		"dense lines": strings.Repeat("a|b&&c||d;e&f\n", 10_000),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if d, at := nesting(src); d > MaxNesting {
				t.Fatalf("nesting %d > %d at %d: %.60q", d, MaxNesting, at, src[max(0, at-30):])
			}
			if v := Check(src); !v.Allowed {
				t.Fatalf("refused: %s", v.Message)
			}
		})
	}
}

// treeBytes bounds the tree's bytes for one node the scan counts: the
// reservation of a decision (cost) rests on it. The densest shapes, at a
// size where the measure is not noise.
func TestTreeBytes(t *testing.T) {
	const size = 1 << 18
	shapes := map[string]string{
		"words":     strings.Repeat("a ", size/2),
		"commands":  strings.Repeat("a;", size/2),
		"lines":     strings.Repeat("a\n", size/2),
		"pipe":      strings.Repeat("a|", size/2) + "a",
		"and":       strings.Repeat("a&&", size/3) + "a",
		"params":    "echo " + strings.Repeat("$a", size/2),
		"quoted":    "echo \"" + strings.Repeat("$a", size/2) + "\"",
		"array":     "a=(" + strings.Repeat("b ", size/2) + ")",
		"assigns":   strings.Repeat("a=b ", size/4) + "c",
		"redirects": "a " + strings.Repeat(">a ", size/3),
		"arith":     strings.Repeat("((a+1));", size/8),
		"subst":     strings.Repeat("$(a)", size/4),
		"backquote": strings.Repeat("`a`;", size/4),
		"subshells": strings.Repeat("(a);", size/4),
		"heredocs":  strings.Repeat("a<<E\nE\n", size/7),
		"expansion": "echo " + strings.Repeat("${a:-b}", size/7),
		"case":      "case a in " + strings.Repeat("a)b;;", size/5) + "esac",
		"ifs":       strings.Repeat("if a;then b;fi\n", size/15),
		"procsubst": "a " + strings.Repeat("<(a) ", size/5),
		"tests":     strings.Repeat("[[ a == b ]];", size/13),
	}
	var keep *syntax.File
	for name, src := range shapes {
		sc := measure(src)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f, err := parse(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		keep = f
		runtime.GC()
		runtime.ReadMemStats(&m1)
		perNode := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(sc.nodes)
		if perNode > treeBytes {
			t.Errorf("%s: %.0f bytes of tree a node, more than treeBytes (%d)", name, perNode, treeBytes)
		}
		t.Logf("%-10s %6d nodes, %3.0f bytes a node", name, sc.nodes, perNode)
	}
	runtime.KeepAlive(keep)
}

// The scan never under-counts, tried by brute force: every fragment of
// shell that nests, opens, closes, or is an operator, repeated, and every
// pair of them repeated in turn, in each context where the scan reads
// bytes differently. A text the scan lets through and the parser reads
// has a tree no deeper than nodesPerLevel a level counted (FuzzNesting's
// property): a fragment the scan missed, or a closing byte that released
// levels the parser keeps, shows as a tree as deep as the repetition.
func TestNestingEveryConstruct(t *testing.T) {
	frags := []string{"! ", "-", "~", "+", "!", "a=", "1?", ":1", "**", "time ", "time -p ", "coproc ",
		"coproc c ", "function f ", "f() ", "( ", "{ ", "$(", "${a:-", "`", "\"$(", "[[ ", "a && ", "a || ",
		"if a; then ", "while a; do ", "case a in a) ", "let ", "a[", "$((", "$[", "(( ", "<(", "@(", "!(",
		"- ", "a,", "a<", "a&", "a|", "(", "${a[", "${a: ", "${!a", "\"", "'", "$'", "a\n", "x=(", "a;",
		"[ ", "]", ")", "}", "]]", "))", "fi ", "done ", "esac ", "\\", "#", "&", "|", ";", ";;"}
	ctxs := [][2]string{{"", ""}, {"echo $((", "1))"}, {"[[ ", "a ]]"}, {"let ", "1"}, {"x=([", "1]=b)"},
		{"a[", "1]=b"}, {"echo ${a: ", "1}"}, {"case a in ", "b) ;; esac"}, {"time -p ", "a"},
		{"echo \"$((", "1))\""}, {"cat <<E\n$((", "1))\nE\n"}, {"[[ ( ", "a ) ]]"}, {"f() ", "{ a; }"},
		{"if a; then ", "fi"}}
	try := func(src string) {
		s := measure(src)
		if s.tooDeep() || s.tooMany() {
			return
		}
		if file, err := parse(src); err == nil {
			if d := treeDepth(file); d > nodesPerLevel*(s.depth+1) {
				t.Errorf("%.80q...: a tree %d deep, the scan counted %d levels", src, d, s.depth)
			}
		}
	}
	for i, c := range ctxs {
		for _, f1 := range frags {
			try(c[0] + strings.Repeat(f1, 300) + c[1])
			if raceEnabled && i > 0 {
				continue // the pairs in the first context only: 3 s, not 30
			}
			for _, f2 := range frags {
				try(c[0] + strings.Repeat(f1+f2, 100) + c[1])
			}
		}
	}
}
