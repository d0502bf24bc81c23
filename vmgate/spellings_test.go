package vmgate

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// The classes of spellings that got the wrong verdict (the issue of
// "the spellings that still get the wrong verdict"), each a table: its
// examples, and variants, both ways. Each class has a route in
// FuzzRoutes too (routes, fuzz_test.go).

func checkTable(t *testing.T, cases []struct{ script, want string }) {
	t.Helper()
	for _, tc := range cases {
		if got := want(Check(tc.script)); got != tc.want {
			t.Errorf("Check(%q) = %s, want %s", tc.script, got, tc.want)
		}
	}
}

// git runs git-<cmd> as <cmd> when its argv[0] is git-<cmd>: git runs as
// it is named, not as the file it is.
func TestArgv0Dispatch(t *testing.T) {
	checkTable(t, []struct{ script, want string }{
		{"exec -a git-reset git --hard", "git:reset"},
		{"(exec -a git-reset git --hard HEAD~1)", "git:reset"},
		{"bash -c 'exec -a git-push git origin main'", "git:push"},
		{"exec -a git-commit /usr/bin/git -m x", "git:commit"},
		{"exec -ca git-tag git v1", "git:tag"},
		{"exec -a git-tag git -n9", "allow"},
		{"exec -a git-status git", "allow"},
		{"exec -a git-log git --oneline -3", "allow"},
		// No builtin of that name: git dies ("cannot handle frob as a
		// builtin") and runs nothing.
		{"exec -a git-frobnicate git push", "allow"},
		// -l puts a dash before the name: -git-tag is no git-<cmd>.
		{"exec -la git-tag git log", "allow"},
		{"exec -l git push", "git:push"},
		{"exec -a notgit git push", "git:push"},
		{"exec -a git /bin/true", "allow"},
		{"exec -a git-push ls -la", "allow"},
		{`exec -a "$NAME" git --hard`, "undecidable"},
		// env -a (coreutils 9.7 and later) names the program too.
		{"env -a git-push git origin", "git:push"},
		{"env --argv0=git-status git", "allow"},
		// Links and copies named git-<cmd>.
		{"ln -s /usr/bin/git /tmp/git-push; /tmp/git-push origin main", "git:push"},
		{"cp /usr/bin/git ./git-commit && ./git-commit -m x", "git:commit"},
		{"hash -p /usr/bin/git git-reset; git-reset --hard", "git:reset"},
		{"install -m755 /usr/bin/git bin/git-am; bin/git-am < p.mbox", "git:am"},
		{"ln -s /usr/bin/git git-log; ./git-log --oneline", "allow"},
		{"ln -s /usr/bin/git /tmp/git-status && /tmp/git-status --short", "allow"},
		{"ln -s /usr/bin/git /tmp/g; /tmp/g status", "allow"},
		// A function of the name comes before the hashed program.
		{"git() { echo no; }; hash -p /usr/bin/git g; g push", "git:push"},
		{"g() { echo no; }; hash -p /usr/bin/git g; g push", "allow"},
	})
}

// With expand_aliases, an alias whose value ends in a blank makes bash
// check the next word for an alias too.
func TestAliasChains(t *testing.T) {
	const on = "shopt -s expand_aliases\n"
	checkTable(t, []struct{ script, want string }{
		{on + "alias run='command '; alias gg=git\nrun gg reset --hard", "git:reset"},
		{on + "alias run='command '; alias gg=git\nrun gg status", "allow"},
		{on + "alias s='sudo '; alias g='git'\ns g push", "git:push"},
		{on + "alias s='sudo '; alias g='git'\ns g log -1", "allow"},
		{on + "alias nop=' '; alias c='git commit'\nnop c -m x", "git:commit"},
		{on + "alias a1='a2 '; alias a2='env '; alias a3='git push'\na1 a3 origin", "git:push"},
		{on + "alias t='time '; alias n='nice '; alias g=git\nt n g gc", "git:gc"},
		// No blank at the end: the next word is an argument.
		{on + "alias run='command'; alias gg=git\nrun gg reset --hard", "allow"},
		// A quoted word is not an alias.
		{on + "alias run='command '; alias gg=git\nrun 'gg' reset --hard", "allow"},
		{on + "alias run='command '; alias gg=git\nrun -p gg reset", "allow"},
		// Without expand_aliases, no alias at all.
		{"alias run='command '; alias gg=git\nrun gg reset --hard", "allow"},
		// An alias is not expanded within its own expansion.
		{on + "alias x='x '\nx x x", "allow"},
		// g's expansion starts with g, which is not expanded again: bash
		// runs a command g, with git and push for its arguments.
		{on + "alias g='g '; alias h=git\ng h push", "allow"},
		// ...but once g's value is read, g is an alias again: h's value
		// g is expanded, as bash does (command command git push).
		{on + "alias g='command '; alias h='g '; alias i=git\ng h i push", "git:push"},
		{on + "alias g='echo '; alias h='g '; alias i=git\ng h i push", "allow"},
		// The first word of a value is an alias too; a word joined to
		// more is not.
		{on + "alias a=b; alias b=git\na push", "git:push"},
		{on + "alias ls='ls -la'\nls; ls /tmp", "allow"},
		{on + "alias a='b;c'; alias b=git; alias c='git push'\na", "git:push"},
		{on + "alias a='b\"x\"'; alias b=git\na push", "allow"},
		{on + "alias run='command '; alias gg=\"$G\"\nrun gg push", "undecidable"},
	})
}

// Reads that were refused as writes: git tag lists when -n or a filter
// asks it to, as git does, and git branch creates a branch with -v,
// --sort or --format, as git does.
func TestListingReads(t *testing.T) {
	checkTable(t, []struct{ script, want string }{
		{"git tag -n2 release-1", "allow"},
		{"git tag -n 'v1.*'", "allow"},
		{"git tag -n5 --sort=-v:refname 'v*'", "allow"},
		{"git tag --contains HEAD v1", "allow"},
		{"git tag --no-contains v1 'v2*'", "allow"},
		{"git tag --merged main 'rel-*'", "allow"},
		{"git tag --no-merged=main 'rel-*'", "allow"},
		{"git tag --points-at HEAD rel", "allow"},
		{"git tag -l --format='%(refname)' 'v*'", "allow"},
		// Listing options that do not ask for a list: a name creates.
		{"git tag --sort=refname rel-x", "git:tag"},
		{"git tag --format='%(refname)' rel-y", "git:tag"},
		{"git tag -i rel-w", "git:tag"},
		{"git tag --column rel-z", "git:tag"},
		{"git tag -d release-1", "git:tag"},
		{"git tag -a v2 -m release", "git:tag"},
		{"git tag v2", "git:tag"},
		// branch: the same rule, and its listing options.
		{"git branch -v", "allow"},
		{"git branch -vv --sort=-committerdate", "allow"},
		{"git branch --format='%(refname:short)'", "allow"},
		{"git branch --list 'fix/*' -v", "allow"},
		{"git branch -a -v", "allow"},
		{"git branch --merged main old", "allow"},
		{"git branch -v newbranch", "git:branch"},
		{"git branch --sort=refname newbranch", "git:branch"},
		{"git branch --format=x newbranch", "git:branch"},
		{"git branch -i newbranch", "git:branch"},
		{"git branch -t topic origin/main", "git:branch"},
	})
}

// An alias defined inline is judged by what it expands to.
func TestInlineAliases(t *testing.T) {
	checkTable(t, []struct{ script, want string }{
		{"git -c alias.hist='log --graph' hist", "allow"},
		{"git -c alias.hist='log --graph --oneline' hist -5", "allow"},
		{"git -c alias.st=status st", "allow"},
		{"git -c alias.st='status --short' -c color.ui=never st", "allow"},
		{"git -c alias.ci=commit ci -m x", "git:commit"},
		{"git -c alias.up='pull --rebase' up", "git:pull"},
		{"git -c alias.x='!git commit -am y' x", "git:commit"},
		{"git -c alias.x='!f() { git push; }; f' x", "git:push"},
		{"git -c alias.x='!git \"$@\"' x push", "git:push"},
		{"git -c alias.x='!git \"$@\"' x log", "allow"},
		{"git -c alias.x='!echo hello' x", "allow"},
		{"git -c alias.x='!sh -c \"git status\"' x", "allow"},
		// Aliases of aliases, and a loop (git dies: alias loop).
		{"git -c alias.a=b -c alias.b=log a", "allow"},
		{"git -c alias.a=b -c alias.b='!git push' a", "git:push"},
		{"git -c alias.a=b -c alias.b=a a", "allow"},
		// The alias is unused: the subcommand is another, or a builtin
		// of that name (git runs the builtin, never the alias).
		{"git -c alias.x='!git push' log", "allow"},
		{"git -c alias.status='!git push' status", "allow"},
		{"git -c alias.log=commit log", "allow"},
		// Case does not matter to git's keys.
		{"git -c alias.CI=commit ci -m x", "git:commit"},
		{"git -c Alias.x='log' x", "allow"},
		// Values only the run knows.
		{`git -c alias.x="$A" x`, "undecidable"},
		{`git -c alias.x="$A" log`, "allow"},
		{"git --config-env=alias.x=GA x", "undecidable"},
		{"GA='log -1'; git --config-env=alias.x=GA x", "allow"},
		{"GA=commit; git --config-env=alias.x=GA x -m y", "git:commit"},
		// A program git-<cmd> of git's runs instead of the alias where it
		// is installed: both readings, one verdict or a doubt.
		{"git -c alias.lfs='!git push' lfs ls-files", "undecidable"},
		{"git -c alias.lfs='log' lfs ls-files", "allow"},
		{"git -c alias.lfs='commit' lfs push", "git:lfs push"},
	})
}

// Expansions whose operands are known are evaluated as bash does.
func TestDecidableExpansions(t *testing.T) {
	checkTable(t, []struct{ script, want string }{
		{"X=ngit; ${X:1} commit -m y", "git:commit"},
		{"Y=gqt; ${Y/q/i} commit -m y", "git:commit"},
		{"X=ngit; ${X:1} status", "allow"},
		{"Y=gqt; ${Y/q/i} log", "allow"},
		{"X=xgitx; ${X:1:3} push", "git:push"},
		{"X=xxgit; ${X: -3} push", "git:push"},
		{"X=gitxx; ${X:0:-2} push", "git:push"},
		{"X=xgitxx; ${X:1:-2} push", "git:push"},
		{"n=1; X=ngit; ${X:n} push", "git:push"},
		{"n=1; X=ngit; ${X:$n} push", "git:push"},
		{"X=ngit; ${X:2-1} push", "git:push"},
		{"Y=g_t; ${Y//_/i} push", "git:push"},
		{"Y=gxxt; ${Y/x*x/i} push", "git:push"},
		{"Y=xgit; ${Y/#x/} push", "git:push"},
		{"Y=gitx; ${Y/%x} push", "git:push"},
		{"Y=gxt; ${Y/[x-z]/i} push", "git:push"},
		{"Y=gat; ${Y/[a-h]/i} push", "allow"}, // iat: g is in [a-h]
		{"X=GIT; ${X,,} push", "git:push"},
		{"X=GIT; ${X,,} status", "allow"},
		{"X=Git; ${X,} push", "git:push"},
		{"X=git; Y=${X^^}; ${Y,,} push", "git:push"},
		{"X=xx.git; ${X##*.} push", "git:push"},
		{"X=git.x.y; ${X%%.*} push", "git:push"},
		{"X=a-git; ${X#*-} push", "git:push"},
		{"X=git-a; ${X%-*} push", "git:push"},
		{"X=git; ${X:-echo} push", "git:push"},
		{"X=; ${X:-git} push", "git:push"},
		{"X=; ${X:-echo} push", "allow"},
		{"X=echo; ${X:+git} push", "git:push"},
		{"X=abc; echo ${#X}; ${X/abc/git} push", "git:push"},
		{`a=(xgit b); ${a[0]:1} push`, "git:push"},
		{`set -- ngit; ${1:1} push`, "git:push"},
		{`eval "${X:1}"`, "undecidable"},
		// Operands only the run knows stay undecidable.
		{`${X:1} commit -m y`, "undecidable"},
		{`Y=gqt; ${Y/q/$R} commit -m y`, "undecidable"},
		{`X=ngit; ${X:$N} commit -m y`, "undecidable"},
		{`X=ngit; ${X:$N} status`, "allow"},
		// Strings that merely mention git stay data.
		{"X=ngit; echo ${X:1} commit", "allow"},
		{"Y=gqt; msg=\"${Y/q/i} push later\"; echo \"$msg\"", "allow"},
	})
}

// Call chains are followed while the budgets last, and past them the
// refusal says which budget ran out.
func TestDeepCalls(t *testing.T) {
	chain := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("f0() { git \"$@\"; }\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "f%d() { f%d \"$@\"; }\n", i, i-1)
		}
		fmt.Fprintf(&b, "f%d %s\n", n-1, last)
		return b.String()
	}
	for _, n := range []int{12, 17, 50, 200} {
		if got := want(Check(chain(n, "status"))); got != "allow" {
			t.Errorf("a chain of %d calls reading: %s", n, got)
		}
		if got := want(Check(chain(n, "commit -m x"))); got != "git:commit" {
			t.Errorf("a chain of %d calls writing: %s", n, got)
		}
	}
	// Past the depth budget, the refusal names it.
	v := Check(chain(maxLevel, "status"))
	if want(v) != "undecidable" || !strings.Contains(v.Message, "depth budget ran out") {
		t.Errorf("a chain past the depth budget: %s: %s", want(v), v.Message)
	}
	// Past the work budget: each function calls the next twice.
	var b strings.Builder
	b.WriteString("f0() { git status; }\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "f%d() { f%d; f%d; }\n", i, i-1, i-1)
	}
	b.WriteString("f29\n")
	v = Check(b.String())
	if want(v) != "undecidable" || !strings.Contains(v.Message, "budget ran out") {
		t.Errorf("2^29 calls: %s: %s", want(v), v.Message)
	}
	// A write found before a budget runs out is named, not the doubt.
	v = Check("git add -A\n" + b.String())
	if want(v) != "git:add" {
		t.Errorf("a write before the budget ran out: %s", want(v))
	}
	// A recursion whose words change at each call (the gate does not
	// evaluate the condition that may end it), and one whose words do not
	// (the same call again reads nothing new).
	v = Check(`f() { [ "$1" = xxxx ] || f "x$1"; git log -1; }; f`)
	if want(v) != "undecidable" || !strings.Contains(v.Message, "budget ran out") {
		t.Errorf("a recursion with new words: %s: %s", want(v), v.Message)
	}
	if got := want(Check(`f() { [ "$1" -gt 0 ] && f $(($1-1)); git log -1; }; f 3`)); got != "allow" {
		t.Errorf("a recursion with the same words: %s", got)
	}
}

// The expansions the gate evaluates give what bash gives: each is run
// by bash (where it is installed) and read by the gate.
func TestExpansionsAsBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to compare with")
	}
	vars := "X=ngit; Y=gqt; Z=xx.git.y; U=GiT; E=; N=2; A=(abc xgit); set -- ngit two"
	exps := []string{
		"${X:1}", "${X:1:2}", "${X: -3}", "${X:0:-2}", "${X: -9}", "${X:9}", "${X:N}", "${X:$N}", "${X:1+1}", "${X:(1)}",
		"${Y/q/i}", "${Y//[a-z]/_}", "${Y/#g/G}", "${Y/%t/T}", "${Y/q*/i}", "${Y/?/}", "${Y/'q'/i}", "${Y/\"q\"/i}", "${Y/x/i}",
		"${Z#*.}", "${Z##*.}", "${Z%.*}", "${Z%%.*}", "${Z#x}", "${Z%y}",
		"${U^^}", "${U,,}", "${U^}", "${U,}", "${U,,[GT]}", "${U^^[i]}",
		"${#X}", "${#Z}", "${E:-def}", "${X:-def}", "${E:+alt}", "${X:+alt}", "${X-def}", "${X+alt}",
		"${A[1]:1}", "${A:1}", "${1:1}", "${2/t/T}",
	}
	script := vars
	for _, e := range exps {
		script += "; printf '%s\\n' \"" + e + "\""
	}
	out, err := exec.Command(bash, "-c", script).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(exps) {
		t.Fatalf("bash printed %d lines for %d expansions: %q", len(got), len(exps), got)
	}
	for i, e := range exps {
		f, err := parse(vars + "\n: \"" + e + "\"")
		if err != nil {
			t.Fatal(err)
		}
		w := newWalker(defaultGate, vars, 0)
		w.stmts(f.Stmts[:len(f.Stmts)-1], nil)
		word := f.Stmts[len(f.Stmts)-1].Cmd.(*syntax.CallExpr).Args[1]
		v := w.str(word)
		if v.dyn || v.s != got[i] {
			t.Errorf("%s: the gate reads %q (dynamic: %v), bash %q", e, v.s, v.dyn, got[i])
		}
	}
}
