package vmgate

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzCheck: no input panics or hangs the gate, and the same script gets
// the same verdict twice (the gate holds no state between decisions).
func FuzzCheck(f *testing.F) {
	for _, tc := range seedCases {
		f.Add(tc.script)
	}
	for _, tc := range tableCases {
		f.Add(tc.script)
	}
	f.Fuzz(func(t *testing.T, script string) {
		done := make(chan Verdict, 1)
		go func() { done <- Check(script) }()
		var v1 Verdict
		timer := time.NewTimer(5 * time.Second)
		select {
		case v1 = <-done:
			timer.Stop()
		case <-timer.C:
			t.Fatalf("Check(%q) did not return in 5s", script)
		}
		v2 := Check(script)
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("Check(%q) gave two verdicts:\n%+v\n%+v", script, v1, v2)
		}
		if v1.Allowed != (v1.Reason == nil) || v1.Git != nil && (v1.Reason == nil || *v1.Reason != string(ReasonGitWrite)) {
			t.Fatalf("Check(%q) = inconsistent verdict %+v", script, v1)
		}
	})
}

// FuzzRoutes: a script and its rewrites through the routes the gate
// models (a function, a variable run with eval, sh -c, a pipe into sh) get
// the same verdict: allowed, or refused. A gate that can be stepped
// around by rewording teaches the agent to reword.
func FuzzRoutes(f *testing.F) {
	for _, tc := range seedCases {
		f.Add(tc.script)
	}
	for _, tc := range tableCases {
		f.Add(tc.script)
	}
	f.Fuzz(func(t *testing.T, script string) {
		if !routable(script) {
			return
		}
		want := Check(script)
		for _, rw := range routes(script) {
			got := Check(rw)
			if got.Allowed != want.Allowed {
				t.Fatalf("%q: %v (%s)\nrewritten %q: %v (%s)", script, want.Allowed, reasonOf(want), rw, got.Allowed, reasonOf(got))
			}
		}
	})
}

// routes are a script's rewrites through the routes the gate models:
// every script through a function, a chain of forty calls, eval of a
// variable, sh -c, a pipe into a shell and expansions the gate evaluates (${x:2}, ${x//@/g}), and its
// command word through an alias chain; a script
// that starts with git SUB through git's own dispatch on its name (exec -a
// git-SUB, a link named git-SUB) and through an alias it defines.
func routes(script string) []string {
	q := shellQuote(script)
	rws := []string{
		"f() {\n" + script + "\n}\nf",
		"x=" + q + "\neval \"$x\"",
		"sh -c " + q,
		"bash -c " + q,
		"printf '%s\\n' " + q + " | sh",
		"echo " + q + " | bash",
	}
	// A deep chain of calls, followed to its end.
	var chain strings.Builder
	chain.WriteString("f0() {\n" + script + "\n}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&chain, "f%d() { f%d; }\n", i, i-1)
	}
	rws = append(rws, chain.String()+"f39")
	// Expansions the gate evaluates: a substring, a pattern substitution.
	rws = append(rws, "x="+shellQuote("__"+script)+"\neval \"${x:2}\"")
	if !strings.Contains(script, "@") {
		rws = append(rws, "x="+shellQuote(strings.ReplaceAll(script, "g", "@"))+"\neval \"${x//@/g}\"")
	}
	if word, rest, ok := firstWord(script); ok {
		// An alias whose value ends in a blank checks the next word.
		rws = append(rws, "shopt -s expand_aliases\nalias w0=' '\nalias w1="+shellQuote(word)+"\nw0 w1"+rest)
	}
	if sub, rest, ok := gitFirst(script); ok {
		rws = append(rws,
			"exec -a git-"+sub+" git"+rest,
			"(exec -a git-"+sub+" git"+rest+"\n)",
			"ln -s /usr/bin/git /tmp/git-"+sub+" && /tmp/git-"+sub+rest,
			"cp /usr/bin/git ./git-"+sub+"; ./git-"+sub+rest,
			// An alias the invocation defines, git's words or a shell's.
			"git -c alias.zz="+sub+" zz"+rest,
			"git -c alias.zz='!git "+sub+"' zz"+rest,
		)
	}
	return rws
}

// firstCall is the simple command a script's first statement is, when
// nothing comes before its words (no !, no assignment).
func firstCall(script string) *syntax.CallExpr {
	f, err := parse(script)
	if err != nil || len(f.Stmts) == 0 {
		return nil
	}
	st := f.Stmts[0]
	ce, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Assigns) > 0 || len(ce.Args) == 0 || st.Pos() != ce.Pos() {
		return nil
	}
	return ce
}

// gitFirst splits a script whose first command is git SUB (a subcommand
// the gate knows, no option before it) into SUB and what follows it.
func gitFirst(script string) (sub, rest string, ok bool) {
	ce := firstCall(script)
	if ce == nil || len(ce.Args) < 2 || ce.Args[0].Lit() != "git" {
		return "", "", false
	}
	sub = ce.Args[1].Lit()
	if _, known := gitTable[sub]; !known {
		return "", "", false
	}
	return sub, script[ce.Args[1].End().Offset():], true
}

// firstWord splits a script whose first statement is a simple command
// into its command word, a plain word, and what follows it.
func firstWord(script string) (word, rest string, ok bool) {
	ce := firstCall(script)
	if ce == nil {
		return "", "", false
	}
	word = ce.Args[0].Lit()
	if word == "" || strings.HasPrefix(word, "w0") || strings.HasPrefix(word, "w1") {
		return "", "", false
	}
	return word, script[ce.Args[0].End().Offset():], true
}

// routable keeps the scripts whose rewrites mean the same to bash: one
// that parses, a line or a few of commands, without what a function or a
// new shell sees differently (positional parameters, $0, return, exit,
// traps, aliases, local, here-documents, bash-only syntax that sh -c
// would refuse, NULs).
func routable(s string) bool {
	if s == "" || len(s) > 300 || strings.ContainsAny(s, "\x00$`!\\") || strings.Contains(s, "<<") {
		return false
	}
	// sh -c takes its code from its first non-option argument: a script
	// that starts with - or + would be read as options.
	if t := strings.TrimSpace(s); t == "" || t[0] == '-' || t[0] == '+' {
		return false
	}
	for _, w := range []string{"return", "exit", "trap", "alias", "shopt", "local", "set", "shift", "exec", "source", ". ", "function", "(", "{", "[[", "declare", "typeset", "read", "ulimit", "cd", "IFS", "hash", "ln", "cp ", "install", "unset"} {
		if strings.Contains(s, w) {
			return false
		}
	}
	f, err := parse(s)
	return err == nil && len(f.Stmts) > 0 // an empty function body is a syntax error

}

func reasonOf(v Verdict) string {
	if v.Reason == nil {
		return "allowed"
	}
	g := ""
	if v.Git != nil {
		g = " " + *v.Git
	}
	return *v.Reason + g
}

// FuzzNesting: the scan before the parse never under-counts. The parser
// recurses as deep as the tree it makes, so a text the scan lets through
// has a tree no deeper than a few nodes for each level the scan counted;
// a construct the scan missed would show as a tree far deeper than that.
func FuzzNesting(f *testing.F) {
	for _, tc := range tableCases {
		f.Add(tc.script)
	}
	for _, s := range []string{"[[ ! ! a ]]", "(( - - 1 ))", "time time a", "f() g() { a; }", "echo $((1<<2))\n((a))", "let a=-~1", "a[-~1]=b", "${a: -1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2048 {
			return
		}
		s := measure(src)
		if s.tooDeep() || s.tooMany() {
			return
		}
		file, err := parse(src)
		if err != nil {
			return
		}
		if d := treeDepth(file); d > nodesPerLevel*(s.depth+1) {
			t.Fatalf("%q: a tree %d deep, the scan counted %d levels", src, d, s.depth)
		}
	})
}

// nodesPerLevel is how many nodes of the tree one level of the scan may
// stand for: ( is a statement, a subshell and the statement in it.
const nodesPerLevel = 8

// treeDepth is how deep the parser recursed for f: the depth of its
// tree, but for the chains of && || and | that the parser reads in a loop
// (a && b && c is ((a && b) && c), a tree as deep as the chain is long).
func treeDepth(f *syntax.File) int {
	var stack []syntax.Node
	var steps []int
	depth, deepest := 0, 0
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			depth -= steps[len(steps)-1]
			stack, steps = stack[:len(stack)-1], steps[:len(steps)-1]
			return true
		}
		step := 1
		if len(stack) > 0 {
			switch p := stack[len(stack)-1].(type) {
			case *syntax.BinaryCmd:
				if p.X == n {
					step = 0
				}
			case *syntax.Stmt:
				if _, ok := n.(*syntax.BinaryCmd); ok {
					step = 0
				}
			}
		}
		depth += step
		deepest = max(deepest, depth)
		stack, steps = append(stack, n), append(steps, step)
		return true
	})
	return deepest
}
