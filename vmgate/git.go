package vmgate

import (
	"slices"
	"strings"
)

type gitKind int

const (
	gitRead gitKind = iota
	gitWrite
	gitUndecidable
)

// gitResult is the gate's reading of one git invocation.
type gitResult struct {
	kind gitKind
	sub  string // the subcommand, or what disguises a write ("-c", an env name)
	why  string
}

func (w *walker) git(args []field, c *callCtx) { w.gitRecord(w.analyzeGit(args, "", c), c) }

// gitSub is git-add style: the subcommand is in the program's name. A
// dashed name that is no git command the gate knows (git-cliff,
// git-sizer) is a program of its own: an alias is never reached by a
// dashed name, so it is not judged as one (docs/gate.md, "Names").
func (w *walker) gitSub(sub string, args []field, c *callCtx) {
	if _, known := gitTable[sub]; !known {
		return
	}
	w.gitRecord(w.analyzeGit(args, sub, c), c)
}

func (w *walker) gitRecord(r gitResult, c *callCtx) {
	switch r.kind {
	case gitWrite:
		w.find(c, ReasonGitWrite, r.sub, r.why)
	case gitUndecidable:
		w.undecidable(c, r.why)
	}
}

// gitWouldWrite judges the arguments of a word that may be git.
func (w *walker) gitWouldWrite(args []field, c *callCtx) bool {
	w.probing++
	defer func() { w.probing-- }()
	return w.analyzeGit(args, "", c).kind != gitRead
}

// Git's own options that take a separate value (git --help's list).
var gitValueOpts = map[string]bool{
	"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--super-prefix": true, "--config-env": true, "--attr-source": true, "--list-cmds": true,
}

// gitGlobalLen counts the leading words that are git's own options.
func gitGlobalLen(args []field) int {
	i := 0
	for i < len(args) {
		s := args[i].s
		if args[i].dyn || len(s) < 2 || s[0] != '-' {
			return i
		}
		if gitValueOpts[s] {
			i++
		}
		i++
	}
	return min(i, len(args))
}

// gitWriteName says whether s names a git subcommand that is or may be a
// write: the words that make a dynamic command word undecidable.
func gitWriteName(s string) bool {
	k, ok := gitTable[s]
	return ok && k != kRead
}

func (w *walker) analyzeGit(args []field, dashed string, c *callCtx) gitResult {
	if r, bad := w.gitEnv(c); bad {
		return r
	}
	// The settings of git's environment are read as git -c's, before
	// the command line's (which git appends to GIT_CONFIG_PARAMETERS):
	// one verdict however a setting reaches git (docs/gate.md, "Writes in
	// disguise").
	var al gitAliases
	for _, s := range w.envConfig(c) {
		if s.bad != "" {
			return gitResult{kind: gitUndecidable, why: s.via + " " + s.bad}
		}
		if name, v, ok := w.inlineAlias(s.kv, false, c); ok {
			al.define(name, v)
		} else if r, bad := w.gitConfigParam(s.kv, false, c, s.via); bad {
			return r
		}
	}
	return w.analyzeGitArgs(args, dashed, c, al)
}

// gitAliases are the aliases a git invocation defines for itself (git -c
// alias.NAME=VALUE), by lowercase name, and those being expanded.
type gitAliases struct {
	defined  map[string]field
	expanded []string
}

// analyzeGitArgs reads git's own options, then the subcommand: an alias
// the invocation defined is judged by what it expands to.
func (w *walker) analyzeGitArgs(args []field, dashed string, c *callCtx, al gitAliases) gitResult {
	sub := dashed
	rest := args
	if sub == "" {
		i := 0
		for ; i < len(args); i++ {
			a := args[i]
			s := a.s
			if a.dyn {
				// --git-dir="$D": the option is known, only its value is not.
				name, _, hasValue := strings.Cut(s, "=")
				if !strings.HasPrefix(s, "--") || !hasValue || strings.IndexByte(name, dynMark) >= 0 || name == "--config-env" {
					return gitResult{kind: gitUndecidable, why: "git's subcommand or options are only known at run time"}
				}
				if name == "--exec-path" {
					return gitResult{kind: gitWrite, sub: "--exec-path", why: "git --exec-path=DIR makes git run the programs in DIR"}
				}
				continue
			}
			if s == "" || s[0] != '-' {
				break
			}
			switch {
			case s == "-c" || s == "--config-env":
				if i+1 < len(args) {
					if name, v, ok := w.inlineAlias(args[i+1], s == "--config-env", c); ok {
						al.define(name, v)
					} else if r, bad := w.gitConfigParam(args[i+1], s == "--config-env", c, ""); bad {
						return r
					}
				}
				i++
			case strings.HasPrefix(s, "--config-env="):
				f := field{s: s[len("--config-env="):]}
				if name, v, ok := w.inlineAlias(f, true, c); ok {
					al.define(name, v)
				} else if r, bad := w.gitConfigParam(f, true, c, ""); bad {
					return r
				}
			case gitValueOpts[s]:
				i++
			case strings.HasPrefix(s, "--exec-path="):
				// Git's own programs' place is no disguise: the option is
				// skipped, and the subcommand after it judged.
				if !gitCoreDir(s[len("--exec-path="):]) {
					return gitResult{kind: gitWrite, sub: "--exec-path", why: "git --exec-path=DIR makes git run the programs in DIR"}
				}
			case s == "-v" || s == "--version" || s == "-h" || s == "--help" || s == "--exec-path" ||
				s == "--html-path" || s == "--man-path" || s == "--info-path":
				return gitResult{} // prints and exits
			}
		}
		if i >= len(args) {
			if c.moreArgs {
				return gitResult{kind: gitUndecidable, why: "git's subcommand comes from xargs' input"}
			}
			return gitResult{} // bare git prints its help
		}
		sub, rest = args[i].s, args[i+1:]
	}
	if v, ok := al.defined[strings.ToLower(sub)]; ok && !gitBuiltin(sub) {
		if _, known := gitTable[sub]; !known {
			return w.gitAlias(sub, v, rest, c, al)
		}
		// A program git-<sub> of git's runs where it is installed, the
		// alias where it is not: one verdict if both readings agree, a
		// doubt if they do not.
		prog := w.classify(sub, rest, c)
		w.probing++
		alias := w.gitAlias(sub, v, rest, c, al)
		w.probing--
		if prog.kind != alias.kind {
			return gitResult{kind: gitUndecidable, why: "git " + sub + " runs git-" + sub + " where it is installed, and the alias the command defines where it is not"}
		}
		return prog
	}
	if w.g.rules != nil {
		w.policy("git", append([]field{{s: sub}}, rest...), c)
	}
	return w.classify(sub, rest, c)
}

func (al *gitAliases) define(name string, v field) {
	if al.defined == nil {
		al.defined = map[string]field{}
	}
	al.defined[name] = v
}

// inlineAlias reads git -c alias.NAME=VALUE (or --config-env
// alias.NAME=ENV): an alias for this invocation only.
func (w *walker) inlineAlias(f field, fromEnv bool, c *callCtx) (string, field, bool) {
	key, val, _ := strings.Cut(f.s, "=")
	name, ok := strings.CutPrefix(strings.ToLower(key), "alias.")
	if !ok || name == "" || strings.IndexByte(key, dynMark) >= 0 {
		return "", field{}, false
	}
	if !fromEnv {
		return name, field{s: val, dyn: strings.IndexByte(val, dynMark) >= 0}, true
	}
	// The value is an environment variable's: one the script set, or
	// one only the run knows.
	if v, ok := w.envLookup(c, val); ok && strings.IndexByte(val, dynMark) < 0 {
		return name, v, true
	}
	return name, field{s: string(dynMark), dyn: true}, true
}

// gitAlias judges an alias the invocation defined, as git expands it: a
// value starting with ! is a shell command, run with the arguments after
// it ("$@"); any other is git's words, the arguments appended. An alias
// of an alias is expanded in turn; a loop makes git die.
func (w *walker) gitAlias(name string, v field, rest []field, c *callCtx, al gitAliases) gitResult {
	if v.dyn {
		return gitResult{kind: gitUndecidable, why: "git -c alias." + name + " sets an alias only known at run time"}
	}
	lname := strings.ToLower(name)
	if slices.Contains(al.expanded, lname) || len(al.expanded) >= maxDepth {
		return gitResult{} // git: alias loop detected, nothing runs
	}
	al.expanded = append(slices.Clip(al.expanded), lname)
	val := strings.TrimSpace(v.s)
	switch {
	case val == "" || val == "!":
		return gitResult{} // git: an empty alias fails
	case val[0] == '!' && w.probing > 0:
		// The word may not be git at all: what the alias runs is a doubt,
		// not a write of the script's.
		return gitResult{kind: gitUndecidable, why: "git -c alias." + name + " runs a shell command"}
	case val[0] == '!':
		w.code(field{s: val[1:] + ` "$@"`}, c, rest, false)
		return gitResult{}
	}
	words := splitCmdline(val)
	args := make([]field, 0, len(words)+len(rest))
	for _, wd := range words {
		args = append(args, field{s: wd})
	}
	return w.analyzeGitArgs(append(args, rest...), "", c, al)
}

// splitCmdline splits an alias's value into words as git does: blanks
// separate, quotes group, a backslash escapes.
func splitCmdline(s string) []string {
	var words []string
	var b strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote == 0 && (ch == ' ' || ch == '\t' || ch == '\n'):
			if in {
				words = append(words, b.String())
				b.Reset()
				in = false
			}
			continue
		case ch == '\\' && quote != '\'' && i+1 < len(s):
			i++
			ch = s[i]
		case quote == 0 && (ch == '\'' || ch == '"'):
			quote, in = ch, true
			continue
		case ch == quote:
			quote = 0
			continue
		}
		b.WriteByte(ch)
		in = true
	}
	if in {
		words = append(words, b.String())
	}
	return words
}

// gitBuiltin says whether git runs sub itself: an alias of that name is
// never used. The others of gitTable are programs of git's exec path
// (scripts, or git-lfs), or newer than git 2.39's list of builtins, and
// an alias of their name runs where they are not installed.
func gitBuiltin(sub string) bool {
	_, known := gitTable[sub]
	return known && !gitExternal[sub]
}

var gitExternal = map[string]bool{}

func init() {
	for _, s := range strings.Fields(`archimport backfill bisect citool cvsexportcommit cvsimport daemon
		filter-branch filter-repo gui http-fetch http-push imap-send instaweb last-modified lfs
		merge-one-file mergetool p4 quiltimport refs replay repo request-pull send-email submodule
		subtree survey svn web--browse`) {
		gitExternal[s] = true
	}
}

// gitCoreDir reports whether dir is where a distribution installs git's
// own programs.
func gitCoreDir(dir string) bool {
	switch strings.TrimSuffix(dir, "/") {
	case "/usr/lib/git-core", "/usr/libexec/git-core", "/usr/local/libexec/git-core", "/usr/local/lib/git-core":
		return true
	}
	return false
}

// gitEnv finds environment settings that make git run commands: those
// holding shell code (GIT_PAGER, GIT_EDITOR, GIT_SSH_COMMAND) are read as
// code; the others (GIT_CONFIG_* with such keys, GIT_EXTERNAL_DIFF,
// GIT_EXEC_PATH) are writes in disguise.
func (w *walker) gitEnv(c *callCtx) (gitResult, bool) {
	for _, name := range []string{"GIT_PAGER", "PAGER", "GIT_EDITOR", "VISUAL", "EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF"} {
		// A value only known at run time names a program the gate cannot
		// see, like any program path: it is not refused.
		if f, ok := w.envLookup(c, name); ok && !onlyDynamic(f.s) {
			w.code(f, settingCtx(c), nil, false)
		}
	}
	for _, name := range []string{"GIT_EXEC_PATH"} {
		if f, ok := w.envLookup(c, name); ok && f.s != "" {
			return gitResult{kind: gitWrite, sub: name, why: name + " makes git run another program"}, true
		}
	}
	return gitResult{}, false
}

func valueField(v value) field {
	if !v.known {
		return field{s: string(dynMark), dyn: true, hint: v.hint}
	}
	if v.arr {
		return field{s: strings.Join(v.list, " ")}
	}
	return field{s: v.s}
}

// envLookup finds a variable the command's environment may hold: set for
// the command (FOO=x git, env FOO=x git) or earlier in the script.
func (w *walker) envLookup(c *callCtx, name string) (field, bool) {
	for _, env := range [][]envVar{c.env, w.inherit} {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].name == name {
				return env[i].v, true
			}
		}
	}
	if v, ok := w.vars[name]; ok {
		if v.arr {
			w.charge(len(v.list) * fieldBytes) // joined: at most a value's size
		}
		return valueField(v), true
	}
	return field{}, false
}

// gitConfigParam judges git -c KEY=VALUE (or --config-env KEY=ENVVAR);
// via names the variable of git's environment that set it instead
// (GIT_CONFIG_KEY_0, GIT_CONFIG_PARAMETERS), or is empty for -c.
func (w *walker) gitConfigParam(f field, fromEnv bool, c *callCtx, via string) (gitResult, bool) {
	key, val, _ := strings.Cut(f.s, "=")
	name, what := "-c", "git -c "+key
	if via != "" {
		name, what = via, via+" (setting "+key+")"
	}
	if strings.IndexByte(key, dynMark) >= 0 {
		if via != "" {
			return gitResult{kind: gitUndecidable, why: via + " sets a key only known at run time"}, true
		}
		return gitResult{kind: gitUndecidable, why: "git -c sets a key only known at run time"}, true
	}
	if !fromEnv && configCode(key, val) {
		if !onlyDynamic(val) {
			w.code(field{s: val, dyn: f.dyn}, settingCtx(c), nil, false)
		}
		return gitResult{}, false
	}
	if configRuns(key, val) {
		return gitResult{kind: gitWrite, sub: name, why: what + " makes git run commands"}, true
	}
	return gitResult{}, false
}

// settingCtx is the context in which a setting's code (a pager, an
// editor) is read: git runs it with the command's environment, but it is
// no new command of the script's, so that environment is not handed on
// again (GIT_PAGER='git log' git log would read its pager for ever).
func settingCtx(c *callCtx) *callCtx {
	if len(c.env) == 0 {
		return c
	}
	cc := *c
	cc.env = nil
	return &cc
}

// configCode names settings whose value git runs as shell code: the gate
// reads the value as code instead of refusing the setting.
func configCode(key, val string) bool {
	k := strings.ToLower(key)
	switch k {
	case "core.pager", "core.editor", "sequence.editor", "core.sshcommand", "diff.external":
		return true
	}
	return strings.HasPrefix(k, "pager.") && !isBool(val)
}

func isBool(v string) bool {
	switch strings.ToLower(v) {
	case "", "true", "false", "yes", "no", "on", "off", "0", "1":
		return true
	}
	return false
}

// configRuns names settings that make git run commands: writes in
// disguise (an alias can be `!git commit`, a hook path runs anything).
func configRuns(key, val string) bool {
	if val == "" && !strings.HasPrefix(strings.ToLower(key), "alias.") {
		// An empty value turns the setting off (-c credential.helper=).
		return false
	}
	k := strings.ToLower(key)
	first, _, _ := strings.Cut(k, ".")
	last := k[strings.LastIndexByte(k, '.')+1:]
	switch k {
	case "core.fsmonitor":
		return !isBool(val)
	case "core.hookspath", "core.askpass", "core.gitproxy", "core.alternaterefscommand",
		"credential.helper", "gpg.program", "uploadpack.packobjectshook", "imap.tunnel", "web.browser",
		"include.path", "sendemail.smtpserver", "sendemail.sendmailcmd":
		return true
	}
	switch first {
	case "alias", "includeif", "hook":
		return true
	case "diff":
		return last == "textconv" || last == "command"
	case "filter":
		return last == "clean" || last == "smudge" || last == "process"
	case "merge":
		return last == "driver"
	case "credential":
		return last == "helper"
	case "gpg":
		return last == "program"
	case "remote":
		return last == "uploadpack" || last == "receivepack" || last == "proxy"
	case "difftool", "mergetool", "browser", "man", "trailer":
		return last == "cmd" || last == "command"
	case "submodule":
		return last == "update"
	}
	return false
}

type tableKind int

const (
	kRead tableKind = iota
	kWrite
	kArgs // read or write depending on the arguments
)

// gitTable is the policy: which subcommands write (change refs, index,
// objects, config or remotes, or publish) and which only read. A
// subcommand not listed may be an alias or a git-foo program: undecidable.
var gitTable = map[string]tableKind{}

func init() {
	for _, s := range strings.Fields(`status log diff show blame annotate grep ls-files ls-tree ls-remote
		cat-file rev-parse rev-list describe shortlog version for-each-ref show-ref merge-base
		check-ignore check-attr check-ref-format check-mailmap fsck fsck-objects count-objects diff-files
		diff-index diff-tree difftool help var verify-commit verify-tag verify-pack whatchanged
		range-diff name-rev cherry format-patch archive request-pull show-branch get-tar-commit-id
		column stripspace interpret-trailers patch-id mailinfo mailsplit fmt-merge-msg bugreport
		diagnose show-index unpack-file upload-pack upload-archive clean merge-file pack-objects
		pack-redundant fast-export credential credential-cache credential-store instaweb daemon
		web--browse last-modified hook repo survey grep`) {
		gitTable[s] = kRead
	}
	for _, s := range strings.Fields(`add stage commit push pull fetch clone init init-db checkout switch
		restore reset merge rebase cherry-pick revert am rm mv update-ref update-index commit-tree
		write-tree read-tree gc prune repack filter-branch filter-repo maintenance mktag mktree pack-refs
		fast-import unpack-objects index-pack prune-packed checkout-index merge-tree merge-index
		merge-one-file mergetool update-server-info receive-pack send-pack http-fetch http-push
		fetch-pack send-email imap-send svn p4 cvsexportcommit cvsimport archimport quiltimport
		subtree replay backfill citool gui`) {
		gitTable[s] = kWrite
	}
	for _, s := range strings.Fields(`config tag branch apply stash remote notes symbolic-ref hash-object
		worktree submodule reflog bundle rerere commit-graph multi-pack-index sparse-checkout replace
		lfs bisect refs for-each-repo`) {
		gitTable[s] = kArgs
	}
}

// dryRun lists the options that make a write subcommand only report.
var dryRun = map[string][]string{
	"add": {"-n", "--dry-run"}, "rm": {"-n", "--dry-run"}, "mv": {"-n", "--dry-run"},
	"commit": {"--dry-run"}, "push": {"-n", "--dry-run"}, "fetch": {"--dry-run"},
	"prune": {"-n", "--dry-run"}, "clean": {"-n", "--dry-run"},
	// They print the patch a stopped am or rebase is at, and change nothing.
	"am": {"--show-current-patch"}, "rebase": {"--show-current-patch"},
}

// gitArgs is a subcommand's arguments split into options and operands.
type gitArgs struct {
	opts []string
	ops  []field
	dyn  bool // a dynamic word, or more arguments from xargs: anything may follow
}

// splitArgs splits args; valueOpts lists the options that take a
// separate value (" -m --message ").
func splitArgs(args []field, valueOpts string, more bool) gitArgs {
	g := gitArgs{dyn: more}
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		if a.dyn {
			// A word that starts with a known character other than "-" is
			// an operand; one that starts unknown may be an option too.
			if s[0] == dynMark {
				g.dyn = true
			}
			if s[0] != '-' {
				g.ops = append(g.ops, a)
				continue
			}
			g.dyn = true
			continue
		}
		if s == "--" {
			g.ops = append(g.ops, args[i+1:]...)
			for _, f := range args[i+1:] {
				g.dyn = g.dyn || f.dyn
			}
			break
		}
		if len(s) > 1 && s[0] == '-' {
			g.opts = append(g.opts, s)
			if strings.Contains(valueOpts, " "+s+" ") {
				i++
			}
			continue
		}
		g.ops = append(g.ops, a)
	}
	return g
}

// has says whether an option was given: --long, --long=value, or a
// letter of a short cluster (-df).
func (g gitArgs) has(names ...string) bool {
	for _, o := range g.opts {
		for _, n := range names {
			if o == n || strings.HasPrefix(n, "--") && strings.HasPrefix(o, n+"=") {
				return true
			}
			if len(n) == 2 && len(o) > 2 && o[1] != '-' && strings.IndexByte(o[1:], n[1]) >= 0 && isLetters(o[1:]) {
				return true
			}
		}
	}
	return false
}

// hasLines says whether git tag's -n[<num>] was given (lines of each
// tag's message: a listing option).
func (g gitArgs) hasLines() bool {
	for _, o := range g.opts {
		if n, ok := strings.CutPrefix(o, "-n"); ok && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
			return false
		}
	}
	return true
}

// first is the first operand: a subcommand's own subcommand (stash list).
func (g gitArgs) first() (string, bool) {
	if len(g.ops) == 0 {
		return "", !g.dyn
	}
	if g.ops[0].dyn {
		return "", false
	}
	return g.ops[0].s, true
}

// readCode judges as code the options of read subcommands that run a
// command: git grep -O/--open-files-in-pager, git difftool -x/--extcmd.
// A harmless value passes (-O less); one that runs a write is refused.
func (w *walker) readCode(sub string, rest []field, c *callCtx) {
	var short, long string
	switch sub {
	case "grep":
		short, long = "-O", "--open-files-in-pager"
	case "difftool":
		short, long = "-x", "--extcmd"
	default:
		return
	}
	for k, a := range rest {
		switch {
		case a.s == "--":
			return
		case a.s == long || sub == "difftool" && a.s == short:
			// difftool -x CMD takes the next word; grep -O alone uses the
			// configured pager, judged with the configuration.
			if k+1 < len(rest) && sub == "difftool" {
				w.code(rest[k+1], c, nil, false)
			}
		case strings.HasPrefix(a.s, long+"="):
			f := a
			f.s = a.s[len(long)+1:]
			w.code(f, c, nil, false)
		case strings.HasPrefix(a.s, short) && len(a.s) > len(short):
			f := a
			f.s = a.s[len(short):]
			w.code(f, c, nil, false)
		}
	}
}

func (w *walker) classify(sub string, rest []field, c *callCtx) gitResult {
	write := gitResult{kind: gitWrite, sub: sub, why: "git " + sub + " writes to the repository"}
	switch sub {
	case "push", "send-email", "imap-send", "send-pack", "http-push":
		write.why = "git " + sub + " publishes"
	}
	undecided := gitResult{kind: gitUndecidable, why: "git " + sub + "'s arguments, which decide whether it writes, are only known at run time"}
	if helpAsked(sub, rest) {
		return gitResult{}
	}
	w.readCode(sub, rest, c)
	kind, ok := gitTable[sub]
	if !ok {
		return gitResult{kind: gitUndecidable, sub: sub, why: "git " + sub + " is not a git command the gate knows: it may be an alias"}
	}
	var judged gitKind
	switch {
	case kind == kRead:
		return gitResult{}
	case kind == kWrite:
		if opts := dryRun[sub]; opts != nil && splitArgs(rest, "", false).has(opts...) {
			return gitResult{}
		}
		return write
	case sub == "submodule":
		judged = w.submodule(rest, c)
	case sub == "for-each-repo":
		return gitResult{kind: gitUndecidable, sub: sub, why: "git for-each-repo runs git commands named in configuration"}
	default:
		if v, ok := byVerb[sub]; ok {
			g := splitArgs(rest, v.valued, c.moreArgs)
			judged = v.judge(g)
			if s, _ := g.first(); sub == "lfs" {
				write.sub = "lfs " + s
				write.why = "git lfs " + s + " writes to the repository"
			}
		} else if o, ok := byOptions[sub]; ok {
			judged = o.judge(splitArgs(rest, o.valued, c.moreArgs))
		} else {
			judged = gitUndecidable
		}
	}
	switch judged {
	case gitWrite:
		return write
	case gitUndecidable:
		return undecided
	}
	return gitResult{}
}

// helpAsked says whether the command only prints its help: git help,
// --help anywhere before "--", or -h first.
func helpAsked(sub string, rest []field) bool {
	if sub == "help" || len(rest) > 0 && rest[0].s == "-h" {
		return true
	}
	for _, a := range rest {
		if a.s == "--" {
			break
		}
		if a.s == "--help" {
			return true
		}
	}
	return false
}

// submodule judges git submodule: status and summary read, and foreach
// runs its command with sh in every submodule, judged as code.
func (w *walker) submodule(rest []field, c *callCtx) gitKind {
	s, ok := splitArgs(rest, "", c.moreArgs).first()
	switch {
	case !ok:
		return gitUndecidable
	case s == "" || s == "status" || s == "summary":
		return gitRead
	case s != "foreach":
		return gitWrite
	}
	for i, a := range rest {
		if a.s == "foreach" {
			j := i + 1
			for j < len(rest) && strings.HasPrefix(rest[j].s, "-") {
				j++
			}
			w.code(joinFields(rest[j:]), c, nil, false)
			break
		}
	}
	return gitRead
}

// verbs is how a command whose first operand names what it does is
// judged: by the verbs that only read (every other verb writes), or by
// the verbs that write (every other verb reads). "" is the command alone.
// An operand known only at run time is undecidable.
type verbs struct {
	valued        string // the options that take a value, as splitArgs wants them
	reads, writes []string
}

func (v verbs) judge(g gitArgs) gitKind {
	s, ok := g.first()
	switch {
	case v.writes != nil && slices.Contains(v.writes, s):
		return gitWrite
	case !ok:
		return gitUndecidable
	case v.writes != nil || slices.Contains(v.reads, s):
		return gitRead
	}
	return gitWrite
}

var byVerb = map[string]verbs{
	"remote":           {reads: []string{"", "show", "get-url"}},
	"notes":            {valued: " --ref ", reads: []string{"", "list", "show", "get-ref"}},
	"worktree":         {reads: []string{"", "list"}},
	"sparse-checkout":  {reads: []string{"", "list"}},
	"rerere":           {reads: []string{"status", "diff", "remaining"}},
	"commit-graph":     {valued: " --object-dir ", reads: []string{"", "verify"}},
	"multi-pack-index": {valued: " --object-dir ", reads: []string{"", "verify"}},
	"bisect":           {reads: []string{"", "log", "view", "visualize", "terms", "help"}},
	"refs":             {reads: []string{"", "verify", "list", "exists"}},
	"lfs": {reads: []string{"", "ls-files", "status", "env", "version", "logs", "fsck", "pointer",
		"track", "untrack", "locks", "help"}},
	"reflog": {writes: []string{"expire", "delete", "drop"}},
	"bundle": {writes: []string{"unbundle"}},
}

// byOptions are the commands whose options (and the number of operands)
// decide: each judge gets the split arguments.
var byOptions = map[string]struct {
	valued string
	judge  func(g gitArgs) gitKind
}{
	"config": {" -f --file --blob --type --default --comment --value ", func(g gitArgs) gitKind {
		switch {
		case g.has("--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "--edit", "-e"):
			return gitWrite
		case g.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "--list", "-l"):
			return gitRead
		}
		if s, ok := g.first(); ok {
			switch s {
			case "list", "get":
				return gitRead
			case "set", "unset", "rename-section", "remove-section", "edit":
				return gitWrite
			}
		}
		switch {
		case len(g.ops) >= 2:
			return gitWrite // a key and a value, whatever they hold
		case g.dyn:
			return gitUndecidable
		}
		return gitRead
	}},
	// git tag lists when asked (-l), and when -n or a filter is given
	// without a mode: git tag -n2 release-1 lists the tags matching
	// release-1. --sort, --format, --column and -i do not: with a name they
	// create a tag, as git does.
	"tag": {" -m --message -F --file -u --local-user --contains --no-contains --merged --no-merged --points-at --sort --format --cleanup ", func(g gitArgs) gitKind {
		switch {
		case g.has("-d", "--delete"):
			return gitWrite
		case g.has("-l", "--list", "-v", "--verify"):
			return gitRead
		case g.has("-a", "--annotate", "-s", "--sign", "-m", "--message", "-F", "--file", "-u", "--local-user", "-f", "--force", "-e", "--edit"):
			return gitWrite
		case g.has("--contains", "--no-contains", "--merged", "--no-merged", "--points-at") || g.hasLines():
			return gitRead
		case g.dyn:
			return gitUndecidable
		case len(g.ops) > 0:
			return gitWrite
		}
		return gitRead
	}},
	// git branch lists when asked (--list, --show-current, -a, -r) and
	// when a filter is given; -v, --sort and --format only say how a list
	// looks: with a name they create a branch, as git does.
	"branch": {" -u --set-upstream-to --contains --no-contains --merged --no-merged --points-at --sort --format ", func(g gitArgs) gitKind {
		switch {
		case g.has("-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "--edit-description", "--set-upstream"):
			return gitWrite
		case g.has("-l", "--list", "--show-current", "-a", "--all", "-r", "--remotes", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
			return gitRead
		case g.dyn:
			return gitUndecidable
		case len(g.ops) > 0:
			return gitWrite
		}
		return gitRead
	}},
	"apply": {" -p -C --exclude --include --directory --whitespace -S ", func(g gitArgs) gitKind {
		switch {
		// --check, --stat, --numstat and --summary print instead of
		// applying (unless --apply asks for both), whatever --index or
		// --cached say.
		case g.has("--check", "--stat", "--numstat", "--summary") && !g.has("--apply"):
			return gitRead
		case g.has("--index", "--cached", "-3", "--3way", "--intent-to-add", "-N"):
			return gitWrite
		case g.dyn:
			return gitUndecidable
		}
		return gitRead
	}},
	"stash": {"", func(g gitArgs) gitKind {
		s, ok := g.first()
		switch {
		case !ok:
			return gitUndecidable
		case (len(g.opts) == 0 || len(g.ops) > 0) && (s == "list" || s == "show"):
			return gitRead
		}
		return gitWrite
	}},
	"symbolic-ref": {" -m ", func(g gitArgs) gitKind {
		switch {
		case g.has("-d", "--delete"):
			return gitWrite
		case g.dyn:
			return gitUndecidable
		case len(g.ops) >= 2:
			return gitWrite
		}
		return gitRead
	}},
	"hash-object": {" -t --path ", func(g gitArgs) gitKind {
		switch {
		case g.has("-w"):
			return gitWrite
		case g.dyn:
			return gitUndecidable
		}
		return gitRead
	}},
	"replace": {" --format ", func(g gitArgs) gitKind {
		switch {
		case g.has("-l", "--list"):
			return gitRead
		case g.dyn:
			return gitUndecidable
		case len(g.ops) == 0 && !g.has("-d", "--delete", "--edit", "--graft", "--convert-graft-file"):
			return gitRead
		}
		return gitWrite
	}},
}

func onlyDynamic(s string) bool {
	return strings.TrimSpace(strings.ReplaceAll(s, string(dynMark), "")) == ""
}
