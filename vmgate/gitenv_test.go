package vmgate

import (
	"fmt"
	"strings"
	"testing"
)

// Settings that reach git through its environment, in the script's own
// text, get the verdict git -c gets for them: an alias judged by what it
// expands to, a setting that runs a program refused (named by the
// variable), one whose value is shell code read as code, any other
// passing. (docs/gate.md, "Writes in disguise".)
var envConfigCases = []struct{ script, want string }{
	// GIT_CONFIG_COUNT, _KEY_n, _VALUE_n, every way the script sets them.
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.hist GIT_CONFIG_VALUE_0='log --graph' git hist", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.ci GIT_CONFIG_VALUE_0=commit git ci -m x", "git:commit"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!git push' git x", "git:push"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.status GIT_CONFIG_VALUE_0='!git push' git status", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=./x git status", "git:GIT_CONFIG_KEY_0"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=false git status", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/tmp/h git status", "git:GIT_CONFIG_KEY_0"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=credential.helper GIT_CONFIG_VALUE_0= git log", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.external GIT_CONFIG_VALUE_0='git commit -a' git diff", "git:commit"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.external GIT_CONFIG_VALUE_0=difft git diff", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.sshCommand GIT_CONFIG_VALUE_0='git push' git log", "git:push"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='less -R' git log", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=color.ui GIT_CONFIG_VALUE_0=never git log", "allow"},
	{"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x; git status", "git:GIT_CONFIG_KEY_0"},
	{"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0=status; git st", "allow"},
	{"env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p", "git:push"},
	{"declare -x GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=./m; git status", "git:GIT_CONFIG_KEY_0"},
	{"sudo GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.ci GIT_CONFIG_VALUE_0=commit git ci", "git:commit"},
	// git reads KEY_n only below GIT_CONFIG_COUNT; a count the script
	// does not set may be the environment's.
	{"GIT_CONFIG_COUNT=0 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x git status", "allow"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_1=core.hooksPath GIT_CONFIG_VALUE_1=/x git status", "allow"},
	{"GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x git status", "git:GIT_CONFIG_KEY_0"},
	{"GIT_CONFIG_COUNT=$N GIT_CONFIG_KEY_3=core.hooksPath GIT_CONFIG_VALUE_3=/x git status", "git:GIT_CONFIG_KEY_3"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath git status", "git:GIT_CONFIG_KEY_0"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=\"$K\" GIT_CONFIG_VALUE_0=x git status", "undecidable"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=\"$V\" git x", "undecidable"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=\"$V\" git log", "allow"},
	// What a command runs inherits the environment set for it: a
	// function's body, a shell's code.
	{"f() { git status; }; GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x f", "git:GIT_CONFIG_KEY_0"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x bash -c 'git status'", "git:GIT_CONFIG_KEY_0"},
	{"f() { git ci; }; GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.ci GIT_CONFIG_VALUE_0=commit f", "git:commit"},
	{"f() { git hist; }; GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.hist GIT_CONFIG_VALUE_0=log f", "allow"},
	{"GIT_PAGER='git push' bash -c 'git log'", "git:push"},
	{"f() { git log; }; GIT_PAGER='git push' f", "git:push"},
	{"GIT_EXEC_PATH=/tmp/x sh -c 'git status'", "git:GIT_EXEC_PATH"},
	{"f() { git log; }; GIT_PAGER=cat f", "allow"},
	{"f() { git status; }; GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x true; f", "allow"},
	{"GIT_PAGER='git log' git log", "allow"},
	// The last definition of an alias wins: -c comes after the
	// environment.
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=log git -c alias.x=push x", "git:push"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=push git -c alias.x=log x", "allow"},
	// GIT_CONFIG_PARAMETERS, in git's two forms.
	{`GIT_CONFIG_PARAMETERS="'core.hooksPath'='/x'" git status`, "git:GIT_CONFIG_PARAMETERS"},
	{`GIT_CONFIG_PARAMETERS="'core.hooksPath=/x'" git status`, "git:GIT_CONFIG_PARAMETERS"},
	{`GIT_CONFIG_PARAMETERS="'color.ui'='never' 'alias.st'='status'" git st`, "allow"},
	{`GIT_CONFIG_PARAMETERS="'alias.ci'='commit'" git ci -m x`, "git:commit"},
	{`export GIT_CONFIG_PARAMETERS="'alias.l'='!git log'"; git l`, "allow"},
	{`export GIT_CONFIG_PARAMETERS="'alias.l'='!git push'"; git l`, "git:push"},
	{`GIT_CONFIG_PARAMETERS="'core.pager'='git commit -a'" git log`, "git:commit"},
	{`GIT_CONFIG_PARAMETERS="'alias.x'='!echo '\''quoted'\'''" git x`, "allow"},
	{`GIT_CONFIG_PARAMETERS="'core.fsmonitor'=" git status`, "allow"},
	{`GIT_CONFIG_PARAMETERS="$P" git status`, "undecidable"},
	{`GIT_CONFIG_PARAMETERS="core.hooksPath=/x" git status`, "undecidable"},
	{`unset GIT_CONFIG_PARAMETERS; git status`, "allow"},
	{`export GIT_CONFIG_PARAMETERS; git status`, "allow"},
	// Where git reads and which repository: no verdict changes.
	{"export PATH=$HOME/.local/bin:$PATH; git status", "allow"},
	{"PATH=/opt/git/bin:$PATH git log --oneline", "allow"},
	{"GIT_DIR=x git log", "allow"},
	{"GIT_DIR=/tmp/r.git GIT_WORK_TREE=. git status", "allow"},
	{"GIT_DIR=/tmp/r.git git commit -m x", "git:commit"},
	{"HOME=/tmp/h git status", "allow"},
	// A configuration file the script wrote and points git at: its
	// settings are judged as -c's.
	{`printf '[core]\n\tfsmonitor = ./x\n' > /tmp/g; GIT_CONFIG_GLOBAL=/tmp/g git status`, "git:GIT_CONFIG_GLOBAL"},
	{`printf '[core]\n\tfsmonitor = false\n' > /tmp/g; GIT_CONFIG_GLOBAL=/tmp/g git status`, "allow"},
	{`printf '[alias]\n\thist = log --graph\n' > /tmp/g; GIT_CONFIG_GLOBAL=/tmp/g git hist`, "allow"},
	{`printf '[alias] ci = commit\n' > /tmp/h/.gitconfig; HOME=/tmp/h git ci -m x`, "git:commit"},
	{"cat > /tmp/g <<'EOF'\n[user]\n\tname = \"A B\" # me\nEOF\nGIT_CONFIG_GLOBAL=/tmp/g git log", "allow"},
	{`printf '[diff "x"]\n\ttextconv = cat\n' > /tmp/s; export GIT_CONFIG_SYSTEM=/tmp/s; git diff`, "git:GIT_CONFIG_SYSTEM"},
	{`printf '[core]\n\tpager = "git push"\n' > /tmp/g; GIT_CONFIG_GLOBAL=/tmp/g git log`, "git:push"},
	{`printf '[includeIf "gitdir:/"]\n\tpath = /tmp/i\n' > /tmp/x/git/config; XDG_CONFIG_HOME=/tmp/x git log`, "git:XDG_CONFIG_HOME"},
	{`printf 'oops\n' > /tmp/g; GIT_CONFIG_GLOBAL=/tmp/g git log`, "undecidable"},
	{`printf '[core]\n\tfsmonitor = ./x\n' > /tmp/g; git status`, "allow"},
	// A PATH the script set runs a program it wrote itself, as ./f does.
	{"printf '/usr/bin/git commit -am x\\n' > /tmp/b/git; chmod +x /tmp/b/git; PATH=/tmp/b:$PATH git status", "git:commit"},
	{"printf '/usr/bin/git push\\n' > /tmp/b/git; env PATH=/tmp/b:/usr/bin git status", "git:push"},
	{"printf '/usr/bin/git log\\n' > bin/git; PATH=bin:$PATH git status", "allow"},
	// A fake git that runs git by name runs itself, for ever, as in bash.
	{"printf 'git log\\n' > bin/git; PATH=bin:$PATH git status", "undecidable"},
	{"printf 'git commit -am x\\n' > /tmp/b/git; export PATH=/tmp/b:$PATH; git status", "undecidable"},
	{"printf 'git push\\n' > /tmp/b/git; git status", "allow"},
	{"printf 'git push\\n' > /tmp/b/git; PATH=$PATH:/tmp/b git status", "allow"},
	{"export HOME=/tmp/h XDG_CONFIG_HOME=/tmp/x; git diff", "allow"},
	{"GIT_CONFIG_GLOBAL=/dev/null git log", "allow"},
	// git's own files: a write into them is a git write in disguise.
	{"printf '[core]\\n\\tfsmonitor = ./x\\n' >> .git/config", "git:.git/config"},
	{"echo '#!/bin/sh' > .git/hooks/pre-commit; git status", "git:.git/hooks"},
	{"cat > .git/hooks/post-checkout <<'EOF'\ngit push\nEOF", "git:.git/hooks"},
	{"cp hook.sh .git/hooks/pre-push", "git:.git/hooks"},
	{"cp hook.sh .git/hooks/", "git:.git/hooks"},
	{"install -m 755 hook.sh -t .git/hooks", "git:.git/hooks"},
	{"ln -sf ../../scripts/hook .git/hooks/pre-commit", "git:.git/hooks"},
	{"mv config .git/", "git:.git/config"},
	{"echo x | tee -a .git/config", "git:.git/config"},
	{"echo x > .git/modules/sub/config", "git:.git/config"},
	{"echo x > \"$REPO/.git/config\"", "git:.git/config"},
	{"echo '[alias] ci = commit' >> ~/.gitconfig", "git:~/.gitconfig"},
	{"echo '[alias] ci = commit' >> \"$HOME/.gitconfig\"", "git:~/.gitconfig"},
	{"echo x > ~/.config/git/config", "git:~/.gitconfig"},
	{"echo x > /root/.gitconfig", "git:~/.gitconfig"},
	{"cp dotfiles/.gitconfig ~/", "git:~/.gitconfig"},
	{"cp -r dotfiles/hooks .git/", "git:.git/hooks"},
	{"mv .git/hooks/pre-commit.sample .git/hooks/pre-commit", "git:.git/hooks"},
	{"cp -r .git/hooks /tmp/backup", "allow"},
	{"cp notes.txt ~/", "allow"},
	{"HOME=/tmp/h; echo x > /tmp/h/.gitconfig", "git:~/.gitconfig"},
	{"GIT_DIR=/tmp/r.git; echo x > /tmp/r.git/config", "git:.git/config"},
	{"{ echo '[core]'; echo 'hooksPath = /x'; } > .git/config", "git:.git/config"},
	// Reading them, and writing any other file, passes.
	{"cat .git/config", "allow"},
	{"grep -r url .git/config ~/.gitconfig", "allow"},
	{"ls .git/hooks/", "allow"},
	{"echo x >> .gitignore", "allow"},
	{"echo build/ >> .git/info/exclude", "allow"},
	{"cat > .gitconfig <<'EOF'\n[user]\nEOF", "allow"},
	{"echo x > config", "allow"},
	{"git log > /tmp/hooks", "allow"},
	{"cp .git/config /tmp/config.bak", "allow"},
	{"cp -r hooks/ /tmp/", "allow"},
}

// TestEnvConfigMany: a command with more settings in its environment
// than the gate reads is a doubt, whatever comes last; fifty thousand
// of them cost the decision no more than its budgets allow.
func TestEnvConfigMany(t *testing.T) {
	var b strings.Builder
	for n := 0; n < 300; n++ {
		fmt.Fprintf(&b, "GIT_CONFIG_KEY_%d=color.ui GIT_CONFIG_VALUE_%d=never ", n, n)
	}
	b.WriteString("GIT_CONFIG_KEY_300=core.hooksPath GIT_CONFIG_VALUE_300=/x git status")
	if got := want(Check(b.String())); got != "undecidable" {
		t.Errorf("301 settings, the last core.hooksPath: %s, want undecidable", got)
	}
	b.Reset()
	for n := 0; n < 50000; n++ {
		fmt.Fprintf(&b, "GIT_CONFIG_KEY_%d=a ", n)
	}
	b.WriteString("git status")
	if got := want(Check(b.String())); got == "allow" {
		t.Errorf("50,000 keys: allowed")
	}
}

func TestEnvConfigAsDashC(t *testing.T) {
	for _, tc := range envConfigCases {
		if got := want(Check(tc.script)); got != tc.want {
			t.Errorf("Check(%q) = %s, want %s", tc.script, got, tc.want)
		}
	}
}

// sqQuote quotes s as git's sq_quote does: in single quotes, each quote
// and ! closed, escaped with a backslash and reopened.
func sqQuote(s string) string {
	return "'" + strings.NewReplacer("'", `'\''`, "!", `'\!'`).Replace(s) + "'"
}

// shQuote quotes s for the script's shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// envRoutes are a git -c KEY=VALUE's rewrites through git's
// environment, every way a script sets it.
func envRoutes(key, val, rest string) []string {
	k, v := shQuote(key), shQuote(val)
	count := "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=" + k + " GIT_CONFIG_VALUE_0=" + v
	params := shQuote(sqQuote(key) + "=" + sqQuote(val))
	routes := []string{
		count + " git " + rest,
		"export " + count + "; git " + rest,
		"env " + count + " git " + rest,
		"declare -x " + count + "\ngit " + rest,
		"GIT_CONFIG_PARAMETERS=" + params + " git " + rest,
		"export GIT_CONFIG_PARAMETERS=" + params + "; git " + rest,
		"GIT_CONFIG_PARAMETERS=" + shQuote(sqQuote(key+"="+val)) + " git " + rest,
	}
	if text, ok := configFileText(key, val); ok {
		routes = append(routes, "cat > /tmp/g <<'EOF'\n"+text+"EOF\nGIT_CONFIG_GLOBAL=/tmp/g git "+rest)
	}
	return routes
}

// configFileText writes KEY=VALUE as a configuration file's text, where
// git could read it back.
func configFileText(key, val string) (string, bool) {
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if first <= 0 || last == len(key)-1 || !configName(key[:first]) || !configName(key[last+1:]) ||
		strings.ContainsAny(val, "\n\r") || strings.Contains(val, "EOF") {
		return "", false
	}
	head := "[" + key[:first] + "]"
	if first != last {
		sub := key[first+1 : last]
		if strings.ContainsAny(sub, "\n\r") || strings.Contains(sub, "EOF") {
			return "", false
		}
		head = "[" + key[:first] + " \"" + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(sub) + "\"]"
	}
	quoted := "\"" + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`).Replace(val) + "\""
	return head + "\n\t" + key[last+1:] + " = " + quoted + "\n", true
}

func configName(s string) bool {
	for i, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '-')) {
			return false
		}
	}
	return s != ""
}

// sameVerdict says whether a verdict through the environment is the one
// git -c got: allowed alike, refused for the same reason, and naming the
// same git write, where -c names the setting (git:-c) by the variable.
func sameVerdict(dashC, env Verdict) bool {
	a, b := want(dashC), want(env)
	if a == "git:-c" {
		return strings.HasPrefix(b, "git:GIT_CONFIG_")
	}
	return a == b
}

// TestEnvConfigRoutes: each setting of a table, given as git -c and
// through the environment, gets one verdict.
func TestEnvConfigRoutes(t *testing.T) {
	for _, c := range []struct{ key, val, rest string }{
		{"alias.hist", "log --graph", "hist"},
		{"alias.ci", "commit", "ci -m x"},
		{"alias.x", "!git push", "x"},
		{"alias.status", "!git push", "status"},
		{"alias.l", "!git log --oneline | head", "l"},
		{"core.fsmonitor", "./x", "status"},
		{"core.fsmonitor", "false", "status"},
		{"core.hooksPath", "/tmp/h", "status"},
		{"core.sshCommand", "ssh -i key", "fetch --dry-run"},
		{"core.sshCommand", "git push", "log"},
		{"diff.external", "git commit -a", "diff"},
		{"diff.external", "difft", "diff"},
		{"core.pager", "less -R", "log"},
		{"include.path", "/tmp/x", "log"},
		{"credential.helper", "", "log"},
		{"color.ui", "never", "log"},
		{"user.name", "It's me!", "log"},
	} {
		dashC := Check("git -c " + shQuote(c.key+"="+c.val) + " " + c.rest)
		for _, s := range envRoutes(c.key, c.val, c.rest) {
			if got := Check(s); !sameVerdict(dashC, got) {
				t.Errorf("Check(%q) = %s; git -c gets %s", s, want(got), want(dashC))
			}
		}
	}
}

// FuzzEnvConfig: a git -c KEY=VALUE and its rewrites through git's
// environment (GIT_CONFIG_COUNT's pairs, GIT_CONFIG_PARAMETERS, as a
// prefix, export, env or declare -x) get one verdict. A setting the
// environment could carry past the gate teaches the agent to move it
// there.
func FuzzEnvConfig(f *testing.F) {
	f.Add("alias.ci", "commit", "ci -m x")
	f.Add("alias.hist", "log --graph", "hist")
	f.Add("alias.x", "!git push", "x")
	f.Add("core.fsmonitor", "./x", "status")
	f.Add("core.hooksPath", "/tmp/h", "status")
	f.Add("diff.external", "git commit -a", "diff")
	f.Add("core.sshCommand", "git push", "log")
	f.Add("color.ui", "never", "log")
	f.Add("url.a]b.insteadOf", "x", "log")
	f.Add(`diff.a"b\\c.textconv`, "cat", "diff")
	f.Fuzz(func(t *testing.T, key, val, rest string) {
		// A key is a name: git refuses one with blanks, quotes or '='
		// before it reads anything, and so would the shell's words.
		if key == "" || len(key) > 64 || strings.ContainsAny(key, "= \t\n'\"\\$`!\x00") ||
			len(val) > 128 || strings.ContainsAny(val, "\n\x00") || len(rest) > 64 || strings.ContainsAny(rest, "\x00") {
			return
		}
		if !routable("git " + rest) {
			return
		}
		dashC := Check("git -c " + shQuote(key+"="+val) + " " + rest)
		if want(dashC) == string(ReasonParseError) {
			return
		}
		for _, s := range envRoutes(key, val, rest) {
			if got := Check(s); !sameVerdict(dashC, got) {
				t.Fatalf("Check(%q) = %s; git -c %s=%s gets %s", s, want(got), key, val, want(dashC))
			}
		}
	})
}
