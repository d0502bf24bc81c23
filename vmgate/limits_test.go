package vmgate

import (
	"strings"
	"testing"
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
