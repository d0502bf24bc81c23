package vmgate

import (
	"strings"
	"testing"
)

// want is a compact verdict: "allow", "git:SUB", "undecidable", "parse-error" or "policy".
func want(v Verdict) string {
	switch {
	case v.Allowed:
		return "allow"
	case v.Reason != nil && *v.Reason == string(ReasonGitWrite):
		if v.Git == nil {
			return "git:?"
		}
		return "git:" + *v.Git
	case v.Reason != nil:
		return *v.Reason
	}
	return "refused-without-reason"
}

// The cases the issue gives, exactly.
var seedCases = []struct{ script, want string }{
	{"cd /mnt/project && git add -A && git status --short", "git:add"},
	{"cd /mnt/project && git config --global --add safe.directory /mnt/project && git add -A && git status --short", "git:config"},
	{"cd /mnt/project && export HOME=/root && git -c safe.directory=/mnt/project add -A && git -c safe.directory=/mnt/project commit -m 'x'", "git:add"},
	{"git -C /mnt/project commit -m x", "git:commit"},
	{"/usr/bin/git push origin main", "git:push"},
	{"git log --oneline -1", "allow"},
	{"git status --short", "allow"},
	{`python3 -c 'print("git add is a string")'`, "allow"},
	{"grep -n 'git commit' notes.txt", "allow"},
	{"ls -la /mnt/project", "allow"},
	{"echo git commit > /tmp/note.txt", "allow"},
}

func TestSeedCases(t *testing.T) {
	for _, tc := range seedCases {
		if got := want(Check(tc.script)); got != tc.want {
			t.Errorf("Check(%q) = %s, want %s", tc.script, got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	writes, reads := 0, 0
	for _, tc := range tableCases {
		got := want(Check(tc.script))
		if got != tc.want {
			t.Errorf("Check(%q) = %s, want %s", tc.script, got, tc.want)
		}
		if tc.want == "allow" {
			reads++
		} else {
			writes++
		}
	}
	if len(tableCases) < 150 {
		t.Errorf("only %d table cases", len(tableCases))
	}
	// Refusals and allowances in equal measure, so that neither a wall
	// nor a hole goes unnoticed.
	if d := writes - reads; d > len(tableCases)/5 || -d > len(tableCases)/5 {
		t.Errorf("unbalanced table: %d refusals, %d allowed", writes, reads)
	}
	t.Logf("%d cases: %d refused, %d allowed", len(tableCases), writes, reads)
}

// tableCases: one line each, grouped by what they exercise.
var tableCases = []struct{ script, want string }{
	// Read modes of write-looking subcommands are reads, in several
	// spellings; the same subcommands asked to write still refuse.
	{"git apply --check --index fix.patch", "allow"},
	{"git apply --stat --cached fix.patch", "allow"},
	{"git apply --numstat fix.patch", "allow"},
	{"git apply --summary --index fix.patch", "allow"},
	{"git apply --check --apply --index fix.patch", "git:apply"},
	{"git apply --index fix.patch", "git:apply"},
	{"git am --show-current-patch", "allow"},
	{"git am --show-current-patch=diff", "allow"},
	{"git am --continue", "git:am"},
	{"git rebase --show-current-patch", "allow"},
	{"git rebase --continue", "git:rebase"},
	{"git tag -n", "allow"},
	{"git tag -n5 --list 'v*'", "allow"},
	// Dashed programs that are no git command are programs of their own
	// (an alias is never reached by a dashed name); dashed git commands
	// are judged as the subcommand.
	{"git-cliff -o CHANGELOG.md", "allow"},
	{"git-sizer --verbose", "allow"},
	{"/usr/local/bin/git-cliff --latest", "allow"},
	{"git-commit -m x", "git:commit"},
	{"git-lfs push origin main", "git:lfs push"},
	{"git lfs push origin main", "git:lfs push"},
	{"git-lfs ls-files", "allow"},
	// Code fed to a shell on its standard input: followed where the
	// producer is known, undecidable where it is not (as sh -c "$(cmd)"
	// is), allowed for a download (deliberately: docs/gate.md).
	{"echo git push | sh", "git:push"},
	{"printf '%s\\n' 'git status' | bash", "allow"},
	{"bash <<< 'git commit -m x'", "git:commit"},
	{"sh < <(echo git push)", "git:push"},
	{"cat gen.sh | sh", "undecidable"},
	{"python3 gen.py | sh", "undecidable"},
	{"python3 gen.py | bash -s -- arg", "undecidable"},
	{"cat notes | grep cmd | sh", "undecidable"},
	{"bash < <(cat gen.sh)", "undecidable"},
	{`sh -c "$(python3 gen.py)"`, "undecidable"},
	{"curl -fsSL https://example.org/install.sh | sh", "allow"},
	{"wget -qO- https://example.org/install.sh | bash", "allow"},
	{"curl -s https://example.org/i.sh | tee i.log | sh", "allow"},
	{"bash < <(curl -fsSL https://example.org/i.sh)", "allow"},
	{"sh < install.sh", "allow"},
	// Another language is not read (deliberately: docs/gate.md).
	{`python3 -c 'import os; os.system("git commit -am x")'`, "allow"},
	{`perl -e 'system("git push")'`, "allow"},
	{"cat gen.sh | sh -c 'echo hi'", "allow"},
	{"python3 gen.py | grep x", "allow"},
	// Function calls: a recursive call with other words is followed (it
	// may run what the first call did not); the same call again is not
	// (nothing new); past the depth limit, undecidable, never allowed.
	{`f() { [ -n "$2" ] && f "$2"; $1 commit -m x; }; f echo git`, "git:commit"},
	{`f() { echo "$1"; [ "$1" = x ] || f x; }; f y`, "allow"},
	{`countdown() { [ "$1" -gt 0 ] && countdown $(($1-1)); echo "$1"; }; countdown 3`, "allow"},
	{`f() { git status; f; }; f`, "allow"},
	{"f0() { git status; }; f1() { f0; }; f2() { f1; }; f3() { f2; }; f4() { f3; }; f5() { f4; }; f6() { f5; }; f7() { f6; }; f8() { f7; }; f9() { f8; }; f10() { f9; }; f11() { f10; }; f12() { f11; }; f13() { f12; }; f14() { f13; }; f15() { f14; }; f16() { f15; }; f17() { f16; }; f17", "allow"},
	// Word splitting follows IFS: the default (bash never takes IFS from
	// the environment), one the script set, or, when only the run knows
	// it, undecidable where the word may hold a git write.
	{`x="git${IFS}push"; $x`, "git:push"},
	{`x="git${IFS}status"; $x`, "allow"},
	{`IFS=:; x="git:push"; $x`, "git:push"},
	{`IFS=,; set -- git,commit; $1 $2`, "git:commit"},
	{`IFS=:; x="echo:git push"; $x`, "allow"},
	{`IFS=:; p=/usr/bin:/bin; for d in $p; do ls "$d"; done`, "allow"},
	{`IFS="$1"; x="git:push"; $x`, "undecidable"},
	{`IFS=$(cat sep); x="git:push"; $x`, "undecidable"},
	{`IFS="$1"; x="git:status"; $x`, "allow"},
	// Run order: an EXIT trap runs after the body; a loop over known
	// words runs each word, in order.
	{"trap 'git push' EXIT; git commit -m x", "git:commit"},
	{"trap 'git push' EXIT; echo done", "git:push"},
	{"trap 'git push' EXIT; trap 'echo bye' EXIT; git status", "allow"},
	{"trap 'git push' INT; git commit -m x", "git:push"},
	{"for c in status commit; do git $c; done", "git:commit"},
	{`for c in add commit; do git "$c" -A; done`, "git:add"},
	{"for c in status log diff; do git $c; done", "allow"},
	{`for f in *.txt; do git add "$f"; done`, "git:add"},
	// printf as bash's printf prints it (mvdan.cc/sh's expand.Format):
	// every conversion and escape, the format reused while arguments
	// remain; $'...' escapes decoded as bash decodes them.
	{"$(printf '%c%c%c' g i t) push", "git:push"},
	{`$(printf '%b' 'g\x69t') push`, "git:push"},
	{`$(printf '\x67it') commit`, "git:commit"},
	{"printf 'git %s\n' push | sh", "git:push"},
	{"printf 'git %s\n' status log | sh", "allow"},
	{"printf 'git %s\n' status push | sh", "git:push"},
	{"$(printf '%s' git) status", "allow"},
	{`x=$'\x67it'; $x push`, "git:push"},
	{`$'\q'git push`, "allow"}, // bash runs "\qgit", no git
	// argv[0] and the command hash: a name or path the script made stand
	// for git is git.
	{"hash -p /usr/bin/git g; g push", "git:push"},
	{"hash -p /usr/bin/git g; g status", "allow"},
	{"ln -s /usr/bin/git ./g; ./g push", "git:push"},
	{"ln -sf /usr/bin/git /tmp/g && /tmp/g commit -m x", "git:commit"},
	{"cp /usr/bin/git ./mygit; ./mygit push", "git:push"},
	{`ln -s "$(command -v git)" g; ./g push`, "undecidable"},
	{`ln -s "$(command -v git)" g; ./g log`, "allow"},
	{"ln -s /usr/bin/python3 py; ./py x.py", "allow"},
	{"exec -a notgit git push", "git:push"},
	{"exec -a git /bin/true", "allow"},
	// builtin runs shell builtins only: git is none.
	{"builtin git commit -m x", "allow"},
	{"builtin git push", "allow"},
	{`builtin eval "git push"`, "git:push"},
	{"builtin echo git push", "allow"},
	// Lists, pipelines, && and ||.
	{"git status; git add .", "git:add"},
	{"git status || git commit -am wip", "git:commit"},
	{"make && git push", "git:push"},
	{"git diff | git apply --index", "git:apply"},
	{"git diff | git apply", "allow"},
	{"git status; git log; git diff --stat", "allow"},
	{"git log | head -5 && git show HEAD:README.md | wc -l", "allow"},
	{"! git commit -m x", "git:commit"},
	{"git fetch origin &", "git:fetch"},
	{"true && false || git status --porcelain", "allow"},
	// Subshells and blocks.
	{"(cd sub && git add x)", "git:add"},
	{"{ git stash; git pull; }", "git:stash"},
	{"(cd sub && git status)", "allow"},
	{"{ git log -3; git branch; } > /tmp/out", "allow"},
	// Every branch counts.
	{"if git diff --quiet; then echo clean; else git commit -am wip; fi", "git:commit"},
	{"if false; then git push; fi", "git:push"},
	{"if [ -d .git ]; then git status; elif true; then git log; else git diff; fi", "allow"},
	{"case $1 in a) git reset --hard;; *) echo no;; esac", "git:reset"},
	{"case $1 in a) git show;; *) git blame x;; esac", "allow"},
	{"while read f; do git add \"$f\"; done < list", "git:add"},
	{"while read f; do git log -1 -- \"$f\"; done < list", "allow"},
	{"until git pull; do sleep 1; done", "git:pull"},
	{"for f in *.go; do git rm \"$f\"; done", "git:rm"},
	{"for f in *.go; do git ls-files --error-unmatch \"$f\"; done", "allow"},
	{"for ((i=0;i<3;i++)); do git gc; done", "git:gc"},
	{"select x in a b; do git log; done", "allow"},
	// Functions: the body counts, and so does what a call passes.
	{"f() { git commit -m \"$1\"; }", "git:commit"},
	{"f() { git log -n \"$1\"; }; f 3", "allow"},
	{"run() { \"$@\"; }; run git push", "git:push"},
	{"run() { \"$@\"; }; run git status", "allow"},
	{"function g { git merge main; }", "git:merge"},
	{"git() { echo no git here; }; git commit", "allow"},
	{"git() { command git \"$@\"; }; git commit -m x", "git:commit"},
	{"f() { f; }; f", "allow"},
	{"g() { git -C /mnt/project \"$@\"; }; g status; g log -1", "allow"},
	{"g() { git -C /mnt/project \"$@\"; }; g status; g commit -m x", "git:commit"},
	{"g() { git -C /mnt/project \"$@\"; }; g \"$SUB\"", "undecidable"},
	{"f() { git add \"$@\"; }", "git:add"},
	{"f() { bash -c 'if ('; }", "parse-error"},
	{"f() { bash -c 'if ('; }; git push", "git:push"},
	{"f() { eval \"$1\"; }; f 'git log'", "allow"},
	{"f() { eval \"$1\"; }; f 'git push'", "git:push"},
	// Command and process substitutions, arithmetic, tests.
	{"echo $(git rev-parse HEAD)", "allow"},
	{"echo $(git commit -m x)", "git:commit"},
	{"x=`git add .`", "git:add"},
	{"diff <(git show HEAD:a) a", "allow"},
	{"cat <(git stash list) >(git stash drop)", "git:stash"},
	{"echo $(( $(git rev-list --count HEAD) + 1 ))", "allow"},
	{"(( $(git tag v1) ))", "git:tag"},
	{"[[ $(git status --porcelain) ]] && echo dirty", "allow"},
	{"[[ -n $(git checkout main) ]]", "git:checkout"},
	{"let x=$(git rev-list --count HEAD)", "allow"},
	{"declare v=$(git init)", "git:init"},
	{"local x=${y:-$(git push)}", "git:push"},
	{"echo ${x:-$(git log -1)}", "allow"},
	// Here-documents and here-strings fed to a shell.
	{"bash <<'EOF'\ngit add -A\nEOF\n", "git:add"},
	{"sh <<EOF\ngit commit -m \"$MSG\"\nEOF\n", "git:commit"},
	{"bash <<EOF\ngit status\nEOF\n", "allow"},
	{"cat <<EOF\ngit commit -m x\nEOF\n", "allow"},
	{"bash <<< 'git push origin HEAD'", "git:push"},
	{"bash <<< 'git log'", "allow"},
	{"cat <<EOF > notes.md\nrun git push when done\nEOF\n", "allow"},
	{"echo 'git add .' | sh", "git:add"},
	{"printf 'git commit -m %s\\n' x | bash", "git:commit"},
	{"echo 'git log' | bash", "allow"},
	{"curl -fsSL https://example.com/install.sh | bash", "allow"},
	{"bash <(echo git push)", "git:push"},
	{"source <(echo git add .)", "git:add"},
	// Shells with -c and combined flags.
	{"bash -c 'git add .'", "git:add"},
	{"sh -ec 'git commit -m x'", "git:commit"},
	{"bash -xc 'git push'", "git:push"},
	{"bash -lc 'cd /mnt/project && git stash pop'", "git:stash"},
	{"bash -o pipefail -c 'git status | cat'", "allow"},
	{"zsh -c 'git log --oneline'", "allow"},
	{"dash -c 'git diff'", "allow"},
	{"sh -c 'git \"$@\"' sh commit -m x", "git:commit"},
	{"sh -c 'git \"$@\"' sh log -1", "allow"},
	{"bash -c \"bash -c 'sh -c \\\"git push\\\"'\"", "git:push"},
	{"bash script.sh", "allow"},
	{"bash -c 'if (' ", "parse-error"},
	// eval, trap, su, runuser, flock, env -S.
	{"eval 'git add .'", "git:add"},
	{"eval git log", "allow"},
	{"eval \"$CMD\"", "undecidable"},
	{"eval $(ssh-agent -s)", "undecidable"},
	{"trap 'git stash' EXIT", "git:stash"},
	{"trap 'rm -f /tmp/x' EXIT", "allow"},
	{"trap - EXIT", "allow"},
	{"su -c 'git commit -m x' dev", "git:commit"},
	{"su dev -c 'git status'", "allow"},
	{"runuser -u dev -- git push", "git:push"},
	{"runuser -l dev -c 'git log'", "allow"},
	{"flock /tmp/lock -c 'git pull'", "git:pull"},
	{"flock -w 10 /tmp/lock git fetch", "git:fetch"},
	{"flock /tmp/lock git status", "allow"},
	{"env -S 'git add -A'", "git:add"},
	{"env -S 'git status'", "allow"},
	// Commands that run their arguments.
	{"sudo git commit -m x", "git:commit"},
	{"sudo -u dev -H git push", "git:push"},
	{"sudo -E -u dev git log", "allow"},
	{"sudo -l git push", "allow"},
	{"env GIT_DIR=.git git add x", "git:add"},
	{"env -i PATH=/usr/bin git status", "allow"},
	{"command git push", "git:push"},
	{"command -v git", "allow"},
	{"exec git commit", "git:commit"},
	{"nice -n 10 git gc", "git:gc"},
	{"nohup git fetch --all &", "git:fetch"},
	{"time git commit -m x", "git:commit"},
	{"/usr/bin/time -v git status", "allow"},
	{"timeout 30 git push", "git:push"},
	{"timeout -s KILL 5m git log", "allow"},
	{"stdbuf -oL git log", "allow"},
	{"stdbuf -o L git pull", "git:pull"},
	{"ionice -c 3 git repack -ad", "git:repack"},
	{"chroot /srv/root git init", "git:init"},
	{"xargs -n1 git rm < files", "git:rm"},
	{"git ls-files | xargs grep -n TODO", "allow"},
	{"echo commit | xargs git", "undecidable"},
	{"xargs -I{} git log -1 {} < revs", "allow"},
	{"find . -name '*.orig' -exec git rm {} +", "git:rm"},
	{"find . -name '*.go' -execdir git log -1 -- {} \\;", "allow"},
	{"find . -ok git checkout -- {} \\;", "git:checkout"},
	{"find . -type f -newer x -print", "allow"},
	{"sudo env nice timeout 5 git push", "git:push"},
	{"busybox sh -c 'git add .'", "git:add"},
	// The command word.
	{`"git" commit`, "git:commit"},
	{`g'i't add .`, "git:add"},
	{`\git push`, "git:push"},
	{`$'\x67it' commit`, "git:commit"},
	{"./git status", "allow"},
	{"../bin/git commit", "git:commit"},
	{"~/bin/git push", "git:push"},
	{"git-add x", "git:add"},
	{"git-commit -m x", "git:commit"},
	{"git-log", "allow"},
	{"GIT_TRACE=1 git status", "allow"},
	{"LC_ALL=C GIT_TRACE=1 git reset --hard", "git:reset"},
	{"G=git; $G commit", "git:commit"},
	{"G=git; $G status", "allow"},
	{"CMD='git push'; $CMD", "git:push"},
	{"CMD='git log'; $CMD", "allow"},
	{"a=(git commit -m x); \"${a[@]}\"", "git:commit"},
	{"a=(git diff); \"${a[@]}\"", "allow"},
	{"export G=/usr/bin/git; \"$G\" add .", "git:add"},
	{"set -- git commit; \"$@\"", "git:commit"},
	{"x=$(echo git); $x add .", "git:add"},
	{"if c; then G=git; else G=echo; fi; $G commit", "undecidable"},
	{"for g in git; do $g push; done", "git:push"},
	{"$GIT commit", "undecidable"},
	{"$GIT status", "allow"},
	{"\"$EDITOR\" notes.txt", "allow"},
	{"$SUDO git add .", "git:add"},
	{"$SUDO git status", "allow"},
	{"$SUDO apt-get install -y jq", "allow"},
	{"$PY -m pytest", "allow"},
	{"${GIT:-git} push", "undecidable"},
	{"${GIT:-git} log", "allow"},
	{"$(which git) commit", "undecidable"},
	{"/usr/bin/gi? commit", "undecidable"},
	{"/usr/bin/gi? --version", "allow"},
	{"{git,commit}", "git:commit"},
	{"git {add,.}", "git:add"},
	{"{echo,git} commit", "allow"},
	{"{git,log}", "allow"},
	{"git{,} log", "undecidable"},
	{"{1..3}git push", "undecidable"},
	{"shopt -s expand_aliases; alias g='git commit'; g -m x", "git:commit"},
	{"shopt -s expand_aliases; alias g='git status'; g", "allow"},
	{"alias g='git commit'; g -m x", "allow"},
	{"bash -ic 'alias g=git; g push'", "git:push"},
	{"bash -O expand_aliases -c 'alias g=git; g push'", "git:push"},
	{"bash -c 'alias g=git; g push'", "allow"},
	{"shopt -s expand_aliases; alias g='git'; g status; g push", "git:push"},
	{"shopt -s expand_aliases; alias ls='ls -la'; ls; ls /tmp", "allow"},
	// git's own options.
	{"git --no-pager log", "allow"},
	{"git -p show", "allow"},
	{"git --git-dir=/x/.git --work-tree /x add .", "git:add"},
	{"git --git-dir /x/.git --work-tree=/x status", "allow"},
	{"git --namespace foo push", "git:push"},
	{"git --bare --literal-pathspecs log", "allow"},
	{"git --exec-path", "allow"},
	{"git --exec-path=/tmp/evil status", "git:--exec-path"},
	{"git --exec-path=/usr/lib/git-core status", "allow"},
	{"git --exec-path=/usr/libexec/git-core/ commit -m x", "git:commit"},
	{"git --version", "allow"},
	{"git -c color.ui=never -c core.quotepath=off diff", "allow"},
	{"git -c alias.st=status st", "allow"},
	{"git -c alias.st='!git stash' st", "git:stash"},
	{"git -c core.fsmonitor=/tmp/x status", "git:-c"},
	// The external diff command is judged as code, as the pager is: a
	// program it names is run as the script would run it (a file the
	// script wrote is read; others are not seen, as for ./x).
	{"git -c diff.external=/tmp/x diff", "allow"},
	{"git -c diff.external=cat diff", "allow"},
	{"git -c diff.external='git commit -am x' diff", "git:commit"},
	{"printf 'git push\\n' > /tmp/x; chmod +x /tmp/x; git -c diff.external=/tmp/x diff", "git:push"},
	{"git -c core.hooksPath=/tmp/hooks status", "git:-c"},
	{"git -c core.pager=cat log", "allow"},
	{"git -c credential.helper= ls-remote origin", "allow"},
	{"git -c credential.helper='!f() { echo x; }; f' ls-remote origin", "git:-c"},
	{"git -c core.pager='git commit -am x' log", "git:commit"},
	{"GIT_PAGER=cat git log", "allow"},
	{"GIT_EXTERNAL_DIFF=/tmp/x git diff", "allow"},
	{"GIT_EXTERNAL_DIFF='git push' git diff", "git:push"},
	// Read subcommands' options that run a command: judged as code.
	{"git grep -O less TODO", "allow"},
	{"git grep -O'git push' TODO", "git:push"},
	{"git grep --open-files-in-pager='git commit -am x' TODO", "git:commit"},
	{"git difftool -x meld", "allow"},
	{"git difftool -x 'git push'", "git:push"},
	{"git difftool --extcmd='git commit -m x'", "git:commit"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!git commit' git x", "git:commit"},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=color.ui GIT_CONFIG_VALUE_0=never git log", "allow"},
	{"git --config-env=alias.x=ENV x", "undecidable"},
	{"git --config-env=core.hooksPath=ENV status", "git:-c"},
	// The policy, line by line.
	{"git clone https://example.com/r.git", "git:clone"},
	{"git config user.name", "allow"},
	{"git config --get user.email", "allow"},
	{"git config --list", "allow"},
	{"git config -l --show-origin", "allow"},
	{"git config --get-regexp '^remote'", "allow"},
	{"git config user.name bob", "git:config"},
	{"git config --unset user.name", "git:config"},
	{"git config --replace-all core.x y", "git:config"},
	{"git config set user.name bob", "git:config"},
	{"git config get user.name", "allow"},
	{"git tag", "allow"},
	{"git tag -l 'v*'", "allow"},
	{"git tag --list", "allow"},
	{"git tag --contains HEAD", "allow"},
	{"git tag v1.0", "git:tag"},
	{"git tag -a v1 -m release", "git:tag"},
	{"git tag -d v1", "git:tag"},
	{"git branch", "allow"},
	{"git branch -a", "allow"},
	{"git branch -r", "allow"},
	{"git branch -vv", "allow"},
	{"git branch --list 'fix/*'", "allow"},
	{"git branch --show-current", "allow"},
	{"git branch --contains HEAD", "allow"},
	{"git branch feature", "git:branch"},
	{"git branch -D old", "git:branch"},
	{"git branch -m old new", "git:branch"},
	{"git branch --set-upstream-to=origin/main", "git:branch"},
	{"git branch -c a b", "git:branch"},
	{"git checkout -b x", "git:checkout"},
	{"git switch main", "git:switch"},
	{"git restore --staged x", "git:restore"},
	{"git rebase -i HEAD~3", "git:rebase"},
	{"git cherry-pick abc", "git:cherry-pick"},
	{"git revert HEAD", "git:revert"},
	{"git am < x.patch", "git:am"},
	{"git apply --cached x.patch", "git:apply"},
	{"git apply --check x.patch", "allow"},
	{"git mv a b", "git:mv"},
	{"git stash list", "allow"},
	{"git stash show -p", "allow"},
	{"git stash", "git:stash"},
	{"git stash push -m x", "git:stash"},
	{"git remote", "allow"},
	{"git remote -v", "allow"},
	{"git remote show origin", "allow"},
	{"git remote get-url origin", "allow"},
	{"git remote add up https://x", "git:remote"},
	{"git remote set-url origin https://x", "git:remote"},
	{"git remote prune origin", "git:remote"},
	{"git notes list", "allow"},
	{"git notes show HEAD", "allow"},
	{"git notes add -m x", "git:notes"},
	{"git update-ref refs/heads/x HEAD", "git:update-ref"},
	{"git update-index --assume-unchanged x", "git:update-index"},
	{"git symbolic-ref HEAD", "allow"},
	{"git symbolic-ref HEAD refs/heads/x", "git:symbolic-ref"},
	{"git commit-tree HEAD^{tree} -m x", "git:commit-tree"},
	{"git hash-object x", "allow"},
	{"git hash-object -w x", "git:hash-object"},
	{"git write-tree", "git:write-tree"},
	{"git read-tree HEAD", "git:read-tree"},
	{"git worktree list", "allow"},
	{"git worktree add ../x", "git:worktree"},
	{"git submodule status", "allow"},
	{"git submodule", "allow"},
	{"git submodule summary", "allow"},
	{"git submodule update --init", "git:submodule"},
	{"git submodule foreach 'git status'", "allow"},
	{"git submodule foreach 'git commit -am x'", "git:commit"},
	{"git prune", "git:prune"},
	{"git filter-branch --tree-filter x", "git:filter-branch"},
	{"git replace abc def", "git:replace"},
	{"git bisect start", "git:bisect"},
	{"git bisect log", "allow"},
	{"git maintenance run", "git:maintenance"},
	{"git commit --help", "allow"},
	{"git push -h", "allow"},
	{"git help commit", "allow"},
	{"git add --dry-run .", "allow"},
	{"git blame -L 1,5 x", "allow"},
	{"git grep -n 'git commit'", "allow"},
	{"git ls-tree -r HEAD", "allow"},
	{"git cat-file -p HEAD", "allow"},
	{"git rev-list --count HEAD", "allow"},
	{"git describe --tags", "allow"},
	{"git shortlog -sn", "allow"},
	{"git reflog", "allow"},
	{"git reflog expire --all", "git:reflog"},
	{"git version", "allow"},
	{"git for-each-ref refs/heads", "allow"},
	{"git show-ref --tags", "allow"},
	{"git merge-base HEAD main", "allow"},
	{"git check-ignore -v x", "allow"},
	{"git fsck --full", "allow"},
	{"git", "allow"},
	// Undecidable git.
	{"git \"$SUB\"", "undecidable"},
	{"git $OPTS log", "undecidable"},
	{"git st", "undecidable"},
	{"git branch \"$NAME\"", "undecidable"},
	{"git config \"$@\"", "undecidable"},
	// Strings that mention git are data.
	{"echo 'remember: git push --force'", "allow"},
	{"printf '%s\\n' 'git add' > /tmp/x", "allow"},
	{"msg='git commit -m x'; echo \"$msg\"", "allow"},
	{"grep -r 'git reset' docs/ | wc -l", "allow"},
	{"cat > hook.sh <<'EOF'\n#!/bin/sh\ngit commit\nEOF\n", "allow"},
	{"# git push\nls", "allow"},
	{"sed -i 's/git add/git stage/' README", "allow"},
	{"node -e 'console.log(\"git push\")'", "allow"},
	{"jq '.git.commit' x.json", "allow"},
	{"echo gitk; ls .git; cat .gitignore", "allow"},
	{"[ -d .git ] && echo repo", "allow"},
	{"ssh-keygen -t ed25519 -f /tmp/k -N ''", "allow"},
	{"pip install gitpython", "allow"},
	{"gitlab-runner --version", "allow"},
	{"echo \"$(date) git status\" >> log", "allow"},
	// What docs/gate.md promises.
	{"$SUDO rm -rf build", "allow"},
	{"$X -C /mnt/project push", "undecidable"},
	{"git -P log", "allow"},
	{"git tag -v v1", "allow"},
	{"git config --edit", "git:config"},
	{"git bundle create /tmp/x.bundle HEAD", "allow"},
	{"git bundle unbundle /tmp/x.bundle", "git:bundle"},
	{"git clean -fdx", "allow"},
	{"git log --help", "allow"},
	{"git add -- --help", "git:add"},
	{"git commit --dry-run", "allow"},
	{"git commit -n -m x", "git:commit"},
	{"git push -n origin main", "allow"},
	{"git -c pager.log=false log", "allow"},
	{"git -c pager.log='git push' log", "git:push"},
	{"GIT_SSH_COMMAND='ssh -i key' git ls-remote origin", "allow"},
	{"$SHELL -c 'git commit'", "git:commit"},
	{"bash -c \"cd $DIR && git push\"", "git:push"},
	{"bash -c \"$X status\"", "allow"},
	{"bash -c \"$X commit\"", "undecidable"},
	{"git lfs ls-files", "allow"},
	{"git lfs push origin main", "git:lfs push"},
	{"git for-each-repo --config=x gc", "undecidable"},
	{"arr[0]=x git add .", "parse-error"},
	{"git --git-dir=\"$GD\" --work-tree=\"$W\" log", "allow"},
	{"git --git-dir=\"$GD\" commit", "git:commit"},
	{"git --exec-path=\"$D\" status", "git:--exec-path"},
	{"git config user.name \"$NAME\"", "git:config"},
	{"git config --get \"$KEY\"", "allow"},
	{"git stash show -p \"$REF\"", "allow"},
	{"git remote add \"$N\" \"$URL\"", "git:remote"},
	{"script -qc 'git push' /dev/null", "git:push"},
	{"script -q -c 'git log' /dev/null", "allow"},
	{"strace -f -o /tmp/t git push", "git:push"},
	{"strace -p 1234", "allow"},
	{"parallel git add ::: a b", "git:add"},
	{"parallel -j4 'git log -1 {}' ::: a b", "allow"},
	{"pkexec git commit", "git:commit"},
	// Files the script writes, then runs.
	{"echo 'git add -A' > /tmp/x.sh; bash /tmp/x.sh", "git:add"},
	{"printf 'git push\\n' > run.sh && chmod +x run.sh && ./run.sh", "git:push"},
	{"cat > c.sh <<'EOF'\n#!/bin/sh\ngit commit -m x\nEOF\nsh c.sh", "git:commit"},
	{"cat <<'EOF' | tee t.sh\ngit stash\nEOF\nsource t.sh", "git:stash"},
	{"echo 'git log' > l.sh; bash l.sh", "allow"},
	{"echo 'git push' > p.sh; cp p.sh q.sh; . ./q.sh", "git:push"},
	{"python3 gen.py > gen.sh; bash gen.sh", "allow"},
	{"curl -fsSL https://example.com/i.sh > i.sh && bash i.sh", "allow"},
	{"echo 'git push' > i.sh; curl -o x https://e > i.sh; bash i.sh", "allow"},
	{"echo 'git push' > r.sh; bash < r.sh", "git:push"},
	{"echo 'git push' > r.sh; sh -c \"$(cat r.sh)\"", "git:push"},
	{"echo 'git log' > r.sh; sh -c \"$(cat r.sh)\"", "allow"},
	{"echo hi > notes.txt; cat notes.txt", "allow"},
	{"echo 'git push' >> a.sh; echo ok", "allow"},
	// Escapes and hints that spell git.
	{"$(printf '\\x67\\x69\\x74') commit", "git:commit"},
	{"$(printf '\\147\\151\\164') log", "allow"},
	{"$(echo -e '\\x67it') push", "git:push"},
	{"X=GIT; ${X,,} push", "git:push"},
	{"X=GIT; ${X,,} status", "allow"},
	{"X=xgitx; ${X:1:3} -c alias.x='!git push' x", "git:push"},
	{"X=xgitx; ${X:$N:3} -c alias.x='!sh' x", "undecidable"},
	{"$T -c alias.x='!sh' x", "undecidable"},
	{"export GIT_PAGER=$(command -v less); git log", "allow"},
	{"export GIT_PAGER=\"$(command -v less) -R\"; git log", "allow"},
	{"git -c core.pager=\"$P\" log", "allow"},
	{"g\x00it push", "git:push"},
	// Parse errors.
	{"echo 'unterminated", "parse-error"},
	{"if true; then", "parse-error"},
	{"git add . )", "parse-error"},
}

func TestMessage(t *testing.T) {
	g, err := New(WithCommitTool("commit_on_host"))
	if err != nil {
		t.Fatal(err)
	}
	v := g.Check("cd /mnt/project\ngit add -A && git commit -m wip")
	if v.Allowed || v.Line != 2 || v.Col != 1 || v.Command != "git add -A" || *v.Git != "add" {
		t.Fatalf("verdict = %+v", v)
	}
	for _, s := range []string{"`git add -A`", "line 2, col 1", "commit_on_host", "right author", "hardened hooks",
		"scratch left out", "Exit 128", "dubious ownership", "safe.directory", "HOME", "work tree", "with a message"} {
		if !strings.Contains(v.Message, s) {
			t.Errorf("message lacks %q:\n%s", s, v.Message)
		}
	}
	if strings.Contains(v.Message, "git_commit") {
		t.Errorf("message names the default tool, not the configured one:\n%s", v.Message)
	}
	// One glance: a handful of lines.
	if n := strings.Count(v.Message, "\n"); n > 4 || len(v.Message) > 700 {
		t.Errorf("message too long (%d lines, %d bytes):\n%s", n+1, len(v.Message), v.Message)
	}
	if u := Check(`eval "$X"`); !strings.Contains(u.Message, "cannot tell") || !strings.Contains(u.Message, "git_commit") {
		t.Errorf("undecidable message:\n%s", u.Message)
	}
	if p := Check("echo 'x"); !strings.Contains(p.Message, "does not parse") || !strings.Contains(p.Message, "1:6") {
		t.Errorf("parse-error message:\n%s", p.Message)
	}
	if a := Check("git status"); a.Message != "" || a.Git != nil || a.Reason != nil {
		t.Errorf("allowed verdict = %+v", a)
	}
}

func TestFirstWriteInRunOrder(t *testing.T) {
	for _, tc := range []struct{ script, git string }{
		{"git commit -m \"$(git add -A)\"", "add"},
		{"git push > \"$(git tag v1)\"", "tag"},
		{"git commit -m x; git add .", "commit"},
		{"git status && git stash; git push", "stash"},
		{"eval \"$X\"; git reset --hard", "reset"},
		{"x=$(git checkout main) git pull", "checkout"},
		{"f() { git push; }\ngit add .\nf", "add"},
		{"f() { git push; }\ngit status", "push"},
		{"f() { git push; }\ng() { git tag v1; }\ng; f", "tag"},
	} {
		v := Check(tc.script)
		if v.Git == nil || *v.Git != tc.git {
			t.Errorf("Check(%q) = %s, want git:%s", tc.script, want(v), tc.git)
		}
	}
}

func TestPositions(t *testing.T) {
	for _, tc := range []struct {
		script    string
		line, col int
		command   string
	}{
		{"ls\n  git push origin main\n", 2, 3, "git push origin main"},
		{"echo ok; bash -c 'git add .'", 1, 10, "git add ."},
		{"if x; then\n\tgit commit -m y\nfi", 2, 2, "git commit -m y"},
	} {
		v := Check(tc.script)
		if v.Line != tc.line || v.Col != tc.col || v.Command != tc.command {
			t.Errorf("Check(%q) at %d:%d %q, want %d:%d %q", tc.script, v.Line, v.Col, v.Command, tc.line, tc.col, tc.command)
		}
	}
}

func TestRules(t *testing.T) {
	r, err := ParseRules("deny.rules", []byte("# no images leave the VM\ndeny docker push: images are pushed by CI\n\ndeny curl\ndeny git fsck : fsck runs on the host\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(WithRules(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ script, want string }{
		{"docker push img", "policy"},
		{"sudo docker push img", "policy"},
		{"docker --debug push img", "policy"},
		{"docker pull img", "allow"},
		{"curl -s https://x", "policy"},
		{"git fsck --full", "policy"},
		{"git gc --auto", "git:gc"},
		{"git status", "allow"},
		{"docker push x; git add .", "git:add"},
	} {
		v := g.Check(tc.script)
		if got := want(v); got != tc.want {
			t.Errorf("Check(%q) = %s, want %s", tc.script, got, tc.want)
		}
	}
	v := g.Check("docker push img")
	if !strings.Contains(v.Message, "images are pushed by CI") || !strings.Contains(v.Message, "deny.rules:2") {
		t.Errorf("policy message: %s", v.Message)
	}
	for _, bad := range []string{"allow git\n", "deny\n", "deny /bin/rm\n", "deny a b c d\n"} {
		if _, err := ParseRules("r", []byte("# ok\n"+bad)); err == nil || !strings.HasPrefix(err.Error(), "r:2:") {
			t.Errorf("ParseRules(%q) error = %v, want r:2: ...", bad, err)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(WithCommitTool("")); err == nil {
		t.Error("empty commit tool accepted")
	}
	if _, err := New(WithCommitTool("a\nb")); err == nil {
		t.Error("two-line commit tool accepted")
	}
}

func TestDepthAndSize(t *testing.T) {
	s := "git status"
	for range 12 {
		s = "bash -c " + shellQuote(s)
	}
	if got := want(Check(s)); got != "undecidable" {
		t.Errorf("12 nested bash -c = %s, want undecidable", got)
	}
	var b strings.Builder
	b.WriteString("f0() { git status; }\n")
	for i := 1; i < 30; i++ {
		b.WriteString("f" + itoa(i) + "() { f" + itoa(i-1) + "; f" + itoa(i-1) + "; }\n")
	}
	b.WriteString("f29\n")
	if got := want(Check(b.String())); got != "allow" && got != "undecidable" {
		t.Errorf("exponential calls = %s", got)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestConcurrent(t *testing.T) {
	done := make(chan bool)
	for range 8 {
		go func() {
			for _, tc := range tableCases {
				if got := want(Check(tc.script)); got != tc.want {
					t.Errorf("concurrent Check(%q) = %s, want %s", tc.script, got, tc.want)
				}
			}
			done <- true
		}()
	}
	for range 8 {
		<-done
	}
}

// The same script always gets the same verdict, whatever map order does.
func TestDeterministic(t *testing.T) {
	script := "GIT_CONFIG_KEY_3=alias.a GIT_CONFIG_KEY_1=core.hooksPath GIT_CONFIG_KEY_2=diff.external; export GIT_CONFIG_KEY_3 GIT_CONFIG_KEY_1 GIT_CONFIG_KEY_2; git status"
	first := Check(script)
	if first.Git == nil || *first.Git != "GIT_CONFIG_KEY_1" {
		t.Fatalf("verdict = %+v", first)
	}
	for range 50 {
		if v := Check(script); *v.Git != *first.Git || v.Message != first.Message {
			t.Fatalf("verdicts differ: %+v vs %+v", v, first)
		}
	}
}

func TestMessageNamesTheCall(t *testing.T) {
	v := Check("run() { echo \"+ $*\"; \"$@\"; }\nrun git add -A")
	if v.Line != 1 || !strings.Contains(v.Message, "called at line 2, col 1: `run git add -A`") {
		t.Errorf("verdict = %+v", v)
	}
}
