package vmgate

// The commands the gate knows: exec decides one command as bash would run
// it, unwrapping the commands that run other commands (wrappers, shells,
// eval, sudo, xargs, find -exec...).

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// exec decides one command as bash would run it: argv are its fields
// after expansion. Commands that run other commands are unwrapped.
func (w *walker) exec(argv []field, c *callCtx) {
	if w.done || len(argv) == 0 || !w.tick(1) {
		return
	}
	head := argv[0]
	base, ok := commandName(head)
	if !ok {
		w.dynamicCommand(argv, c)
		return
	}
	// The name as written is looked up first: aliases and functions
	// come before any program, a program the script wrote before others.
	plain := !strings.Contains(head.s, "/")
	if plain && w.expandAliases && !head.quoted && c.callWord != nil {
		if v, ok := w.aliases[head.s]; ok {
			w.alias(v, c)
			return
		}
	}
	if plain && !c.noFunc {
		if body, ok := w.funcs[head.s]; ok {
			w.callFunc(head.s, body, argv[1:], c)
			return
		}
	}
	if !plain && w.files != nil {
		if _, ok := w.files[cleanPath(head.s)]; ok {
			w.runFile(head, c, argv[1:], false) // ./run.sh, written above
			return
		}
	}
	if plain && w.files != nil {
		if f, ok := w.onPath(head.s, c); ok {
			w.runFile(f, c, argv[1:], false) // PATH=/tmp/b:$PATH git, /tmp/b/git written above
			return
		}
	}
	// argv[0]: what the program is called, the word as written unless
	// exec -a (or env -a) named it otherwise. It applies to this program
	// only, not to what the program runs.
	argv0 := head
	if c.argv0 != nil {
		argv0 = *c.argv0
	}
	if to, ok := w.renamed(head); ok {
		// hash -p /usr/bin/git g; g push: g is git.
		if to == maybeGit {
			w.dynamicCommand(append([]field{{s: string(dynMark), dyn: true, hint: "git"}}, argv[1:]...), c)
			return
		}
		base = to
	}
	args := argv[1:]
	switch {
	case base == "git":
		w.gitByName(argv0, args, c)
		return
	case strings.HasPrefix(base, "git-") && len(base) > 4:
		w.gitSub(base[4:], args, c)
		if name, _ := commandName(argv0); name != base && !w.done {
			// A git-<cmd> of git's own is git itself, which runs by its
			// name: named otherwise, it may run what the arguments say.
			w.gitByName(argv0, args, c)
		}
		return
	}
	if base != "git" && w.g.rules != nil {
		w.policy(base, args, c)
	}
	// From here on the word is not the one the script wrote: an alias or
	// function of the same name does not apply to a wrapped command.
	inner := *c
	inner.noFunc = true
	inner.callWord = nil
	inner.argv0 = nil
	if wr, ok := wrappers[base]; ok {
		w.wrapper(wr, args, &inner)
		return
	}
	w.command(base, args, c, &inner)
}

// command dispatches a command the gate follows by its name: one flat
// table, each entry one method. c is the call as written; inner is the
// same call for what the command wraps (no alias or function applies).
func (w *walker) command(base string, args []field, c, inner *callCtx) {
	switch base {
	case "builtin":
		w.builtin(args, inner)
	case "exec":
		w.execBuiltin(args, inner)
	case "git":
		w.git(args, c)
	case "bash", "sh", "dash", "zsh", "ksh", "ash", "mksh", "rbash":
		w.shell(args, c)
	case "busybox":
		w.exec(args, inner)
	case "eval":
		w.code(joinFields(args), c, nil, true)
	case "trap":
		w.trap(args, c)
	case "source", ".":
		w.source(args, c)
	case "su", "runuser":
		w.su(base, args, c)
	case "sudo":
		w.sudo(args, inner, optSpec{short: "CDghprRtTuU", long: []string{"user", "group", "chdir", "close-from", "host", "prompt", "role", "type", "command-timeout", "other-user", "chroot"}}, "elvVK")
	case "doas":
		w.sudo(args, inner, optSpec{short: "uC"}, "L")
	case "env":
		w.env(args, inner)
	case "chroot":
		w.chroot(args, c, inner)
	case "flock":
		w.flock(args, inner)
	case "xargs":
		w.xargs(args, inner)
	case "find":
		w.findExec(args, inner)
	case "watch":
		w.watch(args, c, inner)
	case "script":
		w.script(args, c)
	case "parallel":
		w.parallel(args, c, inner)
	case "alias":
		w.defineAlias(args)
	case "shopt":
		w.shopt(args)
	case "set":
		w.set(args)
	case "unset":
		w.forget(args, true)
	case "read", "mapfile", "readarray", "getopts":
		w.forget(args, false)
	case "printf":
		w.printf(args, c)
	case "echo":
		if c.capture != nil {
			out, ok := echoOutput(args)
			w.produce(c, out, ok)
		}
	case "tee":
		for _, a := range args {
			if a.dyn || !strings.HasPrefix(a.s, "-") {
				w.writesGitFile(a, false, c.node)
			}
		}
		w.tee(args, c)
	case "cp", "mv":
		w.gitFileDestinations(args, c)
		w.copy(args)
	case "ln", "install":
		w.gitFileDestinations(args, c)
		w.link(args, base == "ln")
	case "hash":
		w.hash(args)
	case "cat":
		w.cat(args, c)
	}
}

// builtin runs a shell builtin only: `builtin git push` runs nothing;
// `builtin eval "..."` runs its code.
func (w *walker) builtin(args []field, inner *callCtx) {
	if len(args) > 0 && !args[0].dyn && bashBuiltins[args[0].s] {
		w.exec(args, inner)
	} else if len(args) > 0 && args[0].dyn {
		w.dynamicCommand(args, inner)
	}
}

// gitByName runs git as git runs itself: by the last element of its
// argv[0], not by the file it is. Named git-<cmd> (a link or a copy of that
// name, exec -a git-<cmd>) it runs the builtin <cmd> with the arguments,
// and dies if there is none; named otherwise, the arguments name the
// subcommand.
func (w *walker) gitByName(argv0 field, args []field, c *callCtx) {
	name, known := commandName(argv0)
	if !known {
		w.undecidable(c, "git's name (argv[0]) is only known at run time, and git named git-<cmd> runs <cmd>")
		return
	}
	if sub, ok := strings.CutPrefix(name, "git-"); ok && sub != "" {
		w.gitSub(sub, args, c)
		return
	}
	w.git(args, c)
}

// execBuiltin is bash's exec [-cl] [-a NAME] [CMD ARGS...]: CMD runs in
// the shell's place, named NAME (-l puts a - before its name, as a login
// shell's).
func (w *walker) execBuiltin(args []field, inner *callCtx) {
	var name *field
	login := false
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		if a.dyn && strings.HasPrefix(a.s, "-") || a.s != "" && a.s[0] == dynMark {
			w.dynamicCommand(args[i:], inner)
			return
		}
		s := a.s
		switch {
		case s == "--":
			i++
			break loop
		case len(s) < 2 || s[0] != '-':
			break loop
		}
		for j := 1; j < len(s); j++ {
			switch s[j] {
			case 'c':
			case 'l':
				login = true
			case 'a':
				f := a
				if f.s = s[j+1:]; f.s == "" {
					if i+1 >= len(args) {
						return
					}
					i++
					f = args[i]
				}
				name = &f
				j = len(s)
			default:
				return // exec refuses the option and runs nothing
			}
		}
	}
	if i >= len(args) {
		return // exec with redirections only
	}
	in := *inner
	switch {
	case name != nil:
		in.argv0 = name
	case login:
		in.argv0 = &args[i]
	}
	if login {
		f := *in.argv0
		f.s = "-" + f.s
		in.argv0 = &f
	}
	w.exec(args[i:], &in)
}

// shopt -s expand_aliases turns aliases on.
func (w *walker) shopt(args []field) {
	if slices.ContainsFunc(args, func(f field) bool { return f.s == "-s" }) &&
		slices.ContainsFunc(args, func(f field) bool { return f.s == "expand_aliases" }) {
		w.expandAliases = true
	}
}

// printf prints what the gate can render, or sets a variable (-v) to
// what it cannot follow.
func (w *walker) printf(args []field, c *callCtx) {
	if len(args) >= 2 && args[0].s == "-v" {
		w.setVar(args[1].s, value{})
		return
	}
	if c.capture == nil {
		return // what it prints is followed only where it is read
	}
	out, made, ok := printfOutput(args)
	w.charge(made)
	w.produce(c, out, ok)
}

// copy follows cp and mv: cp a.sh b.sh leaves b.sh holding what a.sh
// held, as far as the gate knows.
func (w *walker) copy(args []field) {
	if len(args) == 2 && !args[0].dyn && !args[1].dyn {
		if f, ok := w.files[cleanPath(args[0].s)]; ok {
			w.wrote(args[1].s, f, false)
		}
	}
	w.link(args, false)
}

// hash -p PATH NAME: NAME runs PATH from now on.
func (w *walker) hash(args []field) {
	for k := 0; k+2 < len(args); k++ {
		if args[k].s == "-p" && !args[k+1].dyn && !args[k+2].dyn {
			if to, ok := commandName(args[k+1]); ok {
				w.standFor(args[k+2].s, to)
			}
		}
	}
}

// bashBuiltins are the builtins of bash that `builtin NAME` may run and
// that run or change code: the rest print or set state the gate follows
// elsewhere, or nothing.
var bashBuiltins = map[string]bool{
	"eval": true, "source": true, ".": true, "exec": true, "command": true, "trap": true,
	"alias": true, "set": true, "shopt": true, "unset": true, "read": true, "mapfile": true,
	"readarray": true, "printf": true, "echo": true, "getopts": true, "builtin": true,
	"cd": true, "export": true, "declare": true, "local": true, "typeset": true, "hash": true,
	"enable": true, "let": true, "test": true, "[": true, "true": true, "false": true, ":": true,
}

// link records what `ln -s TARGET LINK`, `cp TARGET COPY` or `install
// TARGET COPY` make: LINK runs the program TARGET names. Only the
// programs that matter are followed (git and the shells).
func (w *walker) link(args []field, symbolic bool) {
	var ops []field
	for _, a := range args {
		if strings.HasPrefix(a.s, "-") && !a.dyn {
			continue
		}
		ops = append(ops, a)
	}
	if len(ops) != 2 || ops[1].dyn {
		return
	}
	to, ok := commandName(ops[0])
	if !ok {
		// A target only the run knows (ln -s "$(command -v git)" g) may
		// be git: the link is judged as a dynamic command word, whose
		// arguments decide (./g log passes, ./g push does not).
		to = maybeGit
	} else if !followedProgram(to) {
		return
	}
	dst := ops[1].s
	w.standFor(cleanPath(dst), to)
	if !strings.Contains(dst, "/") {
		w.standFor(cleanPath("./"+dst), to)
	}
}

// maybeGit is what a link stands for when its target may be git.
const maybeGit = "\x00git?"

func followedProgram(name string) bool {
	switch name {
	case "git", "bash", "sh", "dash", "zsh", "ksh":
		return true
	}
	return strings.HasPrefix(name, "git-")
}

func (w *walker) standFor(name, to string) {
	if !w.charge(len(name) + fieldBytes) {
		return
	}
	if w.aliasOf == nil {
		w.aliasOf = map[string]string{}
	}
	w.aliasOf[name] = to
}

// renamed returns the program a command word stands for, if the script
// made it stand for one (link, hash -p).
func (w *walker) renamed(head field) (string, bool) {
	if w.aliasOf == nil || head.dyn {
		return "", false
	}
	if !strings.Contains(head.s, "/") {
		to, ok := w.aliasOf[head.s]
		if ok {
			return to, true
		}
	}
	to, ok := w.aliasOf[cleanPath(head.s)]
	return to, ok
}

// wrapper is a command that runs the command after its options (and after
// `skip` operands of its own), unless one of its options makes it run
// nothing (noRun).
type wrapper struct {
	opts  optSpec
	skip  int
	noRun func(opt string) bool
}

// wrappers are the commands of one shape: options to skip, then a wrapped
// command. The others, with a shape of their own, are exec's cases.
var wrappers = map[string]wrapper{
	"nohup":    {},
	"setsid":   {},
	"unbuffer": {},
	"chronic":  {},
	// command -v and -V only print.
	"command": {noRun: func(o string) bool { return strings.ContainsAny(o, "vV") }},
	"nice":    {opts: optSpec{short: "n", long: []string{"adjustment"}}},
	"time":    {opts: optSpec{short: "fo", long: []string{"format", "output"}}},
	"timeout": {opts: optSpec{short: "sk", long: []string{"signal", "kill-after"}}, skip: 1}, // the duration
	"stdbuf":  {opts: optSpec{short: "ioe", long: []string{"input", "output", "error"}}},
	// ionice -p/-P/-u changes running processes and runs nothing.
	"ionice": {opts: optSpec{short: "cnp", long: []string{"class", "classdata", "pid", "pgid", "uid"}},
		noRun: func(o string) bool {
			return o == "-p" || o == "-P" || o == "-u" || strings.HasPrefix(o, "--pid") || strings.HasPrefix(o, "--pgid") || strings.HasPrefix(o, "--uid")
		}},
	// taskset -p changes a running process; else the mask, then the command.
	"taskset": {skip: 1, noRun: func(o string) bool { return strings.Contains(o, "p") }},
	// strace -p/--attach traces running processes and starts none.
	"strace": {opts: straceOpts, noRun: straceAttach},
	"ltrace": {opts: straceOpts, noRun: straceAttach},
	"pkexec": {opts: optSpec{long: []string{"user"}}},
}

var straceOpts = optSpec{short: "abeEIoOpPsSuUXAFlLn", long: []string{"output", "trace", "signal", "attach", "user", "env", "string-limit"}}

func straceAttach(o string) bool { return o == "-p" || strings.HasPrefix(o, "--attach") }

// wrapper runs what a wrapper command wraps, as a command of its own.
func (w *walker) wrapper(wr wrapper, args []field, inner *callCtx) {
	i, ok := skipOpts(args, wr.opts)
	if wr.noRun != nil {
		for _, a := range args[:min(i, len(args))] {
			if wr.noRun(a.s) {
				return
			}
		}
	}
	if ok {
		i += wr.skip
	}
	w.wrapped(args, i, ok, inner)
}

// source runs a file (or a process substitution) in this shell.
func (w *walker) source(args []field, c *callCtx) {
	if len(args) > 0 && args[0].proc != nil {
		w.code(field{s: *args[0].proc}, c, nil, true)
	} else if len(args) > 0 {
		w.runFile(args[0], c, args[1:], len(args) == 1)
	}
}

// chroot DIR CMD runs CMD; chroot DIR alone starts a shell.
func (w *walker) chroot(args []field, c, inner *callCtx) {
	i, ok := skipOpts(args, optSpec{long: []string{"userspec", "groups"}})
	if ok && i+1 >= len(args) {
		w.stdinShell(c)
		return
	}
	if ok {
		i++ // the new root
	}
	w.wrapped(args, i, ok, inner)
}

// watch runs its command with sh -c, or as argv with -x.
func (w *walker) watch(args []field, c, inner *callCtx) {
	i, ok := skipOpts(args, optSpec{short: "nq", long: []string{"interval"}})
	if !ok || i >= len(args) {
		w.wrapped(args, i, ok, inner)
		return
	}
	for _, a := range args[:i] {
		if a.s == "-x" || a.s == "--exec" {
			w.exec(args[i:], inner)
			return
		}
	}
	w.code(joinFields(args[i:]), c, nil, true)
}

// script -c CMD runs CMD with the shell.
func (w *walker) script(args []field, c *callCtx) {
	for k := 0; k+1 < len(args); k++ {
		s := args[k].s
		if s == "-c" || s == "--command" || len(s) > 2 && s[0] == '-' && s[1] != '-' && s[len(s)-1] == 'c' {
			w.code(args[k+1], c, nil, false)
			return
		}
		if v, ok := strings.CutPrefix(s, "--command="); ok {
			f := args[k]
			f.s = v
			w.code(f, c, nil, false)
			return
		}
	}
}

// parallel: GNU parallel runs its command template with the shell; what
// follows ::: is input.
func (w *walker) parallel(args []field, c, inner *callCtx) {
	i, ok := skipOpts(args, optSpec{short: "jNnaSIdEs", long: []string{"jobs", "arg-file", "sshlogin", "delimiter", "max-args", "eof", "colsep", "joblog", "results", "tmpdir", "workdir", "timeout", "delay", "retries"}})
	if !ok {
		w.dynamicCommand(args[i:], inner)
		return
	}
	j := i
	for j < len(args) && args[j].s != ":::" && args[j].s != "::::" && args[j].s != ":::+" {
		j++
	}
	if j > i {
		tmpl := joinFields(args[i:j])
		if strings.Contains(tmpl.s, "{") {
			tmpl.s = strings.NewReplacer("{}", string(dynMark), "{.}", string(dynMark), "{/}", string(dynMark), "{//}", string(dynMark), "{/.}", string(dynMark), "{#}", string(dynMark)).Replace(tmpl.s)
			tmpl.dyn = true
		}
		w.code(tmpl, c, nil, true)
	}
}

// forget marks the variables a command sets (read, mapfile...) as unknown,
// or, with unset, as known empty.
func (w *walker) forget(args []field, unset bool) {
	for _, a := range args {
		if strings.HasPrefix(a.s, "-") || a.dyn || !unset && !isName(a.s) {
			continue
		}
		w.setVar(a.s, value{known: unset})
	}
}

// tee writes its input to its files, and passes it on.
func (w *walker) tee(args []field, c *callCtx) {
	for _, a := range args {
		if !strings.HasPrefix(a.s, "-") && !a.dyn {
			content := input{}
			if c.stdin != nil {
				content = *c.stdin
			}
			w.wrote(a.s, content, slices.ContainsFunc(args, func(f field) bool { return f.s == "-a" || f.s == "--append" }))
		}
	}
	if c.capture != nil && c.stdin != nil {
		*c.capture = *c.stdin
	}
}

// cat passes its input on, or a file the script wrote ($(cat run.sh)).
func (w *walker) cat(args []field, c *callCtx) {
	switch {
	case c.capture == nil:
	case (len(args) == 0 || len(args) == 1 && args[0].s == "-") && c.stdin != nil:
		*c.capture = *c.stdin
	case len(args) == 1 && !args[0].dyn:
		if f, ok := w.files[cleanPath(args[0].s)]; ok {
			*c.capture = f
		}
	}
}

func (w *walker) produce(c *callCtx, text string, ok bool) {
	if c.capture != nil && ok && w.charge(2*len(text)) {
		*c.capture = input{known: true, text: text}
	}
}

// commandName is the name bash looks up for a command word: the last path
// element, known only if nothing in it is dynamic or a glob.
func commandName(f field) (string, bool) {
	if f.glob {
		return "", false
	}
	base := f.s
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	if base == "" || strings.IndexByte(base, dynMark) >= 0 {
		return "", false
	}
	return base, true
}

func joinFields(fs []field) field {
	var out field
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.s
		out.dyn = out.dyn || f.dyn
		if len(out.hint) < 256 {
			out.hint += f.hint
		}
	}
	out.s = strings.Join(parts, " ")
	return out
}

// standalone names a git write subcommand that is also a common program:
// after a dynamic word ($SUDO rm -rf build) it is read as that program.
var standalone = map[string]bool{"rm": true, "mv": true, "init": true, "apply": true}

// dynamicCommand applies the undecidable rule to a command word whose
// value is only known at run time.
func (w *walker) dynamicCommand(argv []field, c *callCtx) {
	if len(argv) == 0 {
		return
	}
	head := argv[0]
	if head.param == "SHELL" || head.param == "BASH" {
		w.shell(argv[1:], c)
		return
	}
	if !w.charge(2 * (len(head.s) + len(head.hint))) {
		return
	}
	if known := strings.ToLower(head.s + " " + head.hint); strings.Contains(known, "git") {
		// It may well be git: judge its arguments as git's, and the words
		// it may split into (an IFS only the run knows may cut "git:push"
		// in two).
		if w.gitWouldWrite(argv[1:], c) || mayHoldGitWrite(known) {
			w.undecidable(c, "its command word is only known at run time and may be git")
		}
		return
	}
	// It may expand to nothing, or to a wrapper such as $SUDO: the rest
	// may be a command of its own, or the arguments of a hidden git.
	rest := argv[1:]
	j := gitGlobalLen(rest)
	for k := 0; k+1 < j; k++ {
		if rest[k].s == "-c" {
			key, val, _ := strings.Cut(rest[k+1].s, "=")
			if configRuns(key, val) || configCode(key, val) {
				w.undecidable(c, "its command word is only known at run time and its arguments set git configuration that runs commands")
				return
			}
		}
	}
	if j < len(rest) && !rest[j].dyn && gitWriteName(rest[j].s) && !(j == 0 && standalone[rest[j].s]) {
		w.undecidable(c, "its command word is only known at run time and its arguments look like a git write")
		return
	}
	inner := *c
	inner.noFunc = true
	inner.callWord = nil
	w.exec(rest, &inner)
}

// mayHoldGitWrite reports whether s, cut at every character that is not
// part of a word, holds a git write subcommand after a "git" (one pass:
// s may hold up to a variable's size).
func mayHoldGitWrite(s string) bool {
	isWord := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' }
	seenGit := false
	for i := 0; i < len(s); {
		if !isWord(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWord(s[j]) {
			j++
		}
		wd := s[i:j]
		if seenGit && gitWriteName(wd) {
			return true
		}
		seenGit = seenGit || wd == "git" || strings.HasSuffix(wd, "-git")
		i = j
	}
	return false
}

// optSpec says which options of a command take a value.
type optSpec struct {
	short string   // -u USER
	long  []string // --user USER (--user=USER needs no entry)
}

// skipOpts returns the index of the first operand. ok is false when a
// dynamic word stands among the options: it may be the command itself.
func skipOpts(args []field, sp optSpec) (int, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.dyn {
			return i, false
		}
		s := a.s
		if s == "--" {
			return i + 1, true
		}
		if len(s) < 2 || s[0] != '-' {
			return i, true
		}
		if s[1] == '-' {
			if !strings.Contains(s, "=") && slices.Contains(sp.long, s[2:]) {
				i++
			}
			continue
		}
		for j := 1; j < len(s); j++ {
			if strings.IndexByte(sp.short, s[j]) >= 0 {
				if j == len(s)-1 {
					i++
				}
				break
			}
		}
	}
	return len(args), true
}

// wrapped runs args[i:] as a command; a dynamic word among the wrapper's
// options is judged as a dynamic command word.
func (w *walker) wrapped(args []field, i int, ok bool, c *callCtx) {
	i = min(i, len(args))
	if !ok {
		w.dynamicCommand(args[i:], c)
		return
	}
	if i < len(args) {
		w.exec(args[i:], c)
	}
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// assignment splits NAME=VALUE as env and sudo take it.
func assignment(f field) (string, field, bool) {
	i := strings.IndexByte(f.s, '=')
	if i <= 0 || !isName(f.s[:i]) {
		return "", field{}, false
	}
	return f.s[:i], field{s: f.s[i+1:], dyn: f.dyn, hint: f.hint}, true
}

// shell handles bash, sh, dash, zsh...: -c STRING (flags may be combined:
// -lc, -ec, -xc), a script file (not seen), or a script read from stdin.
func (w *walker) shell(args []field, c *callCtx) {
	cmode, smode, aliases := false, false, false
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		if a.proc != nil {
			break // bash <(...): the script is a process substitution
		}
		s := a.s
		if a.dyn && s != "" && s[0] != '-' && s[0] != '+' && (s[0] != dynMark || cmode) {
			break // an operand: the code string, or a script file
		}
		if a.dyn {
			w.undecidable(c, "the shell's options are only known at run time")
			return
		}
		switch {
		case s == "--" || s == "-":
			i++
			break loop
		case s == "--rcfile" || s == "--init-file":
			i++
		case strings.HasPrefix(s, "--"):
		case len(s) > 1 && (s[0] == '-' || s[0] == '+'):
			for _, ch := range s[1:] {
				switch ch {
				case 'c':
					cmode = true
				case 's':
					smode = true
				case 'i':
					aliases = true // an interactive shell expands aliases
				case 'o', 'O':
					i++ // -o pipefail
					if ch == 'O' && i < len(args) && args[i].s == "expand_aliases" && s[0] == '-' {
						aliases = true
					}
				}
			}
		default:
			break loop
		}
	}
	rest := args[min(i, len(args)):]
	// A new shell starts without the aliases of this one, and expands
	// aliases only if interactive or told to: shopt is no environment.
	savedOn, savedAliases := w.expandAliases, w.aliases
	w.expandAliases, w.aliases = aliases, nil
	defer func() { w.expandAliases, w.aliases = savedOn, savedAliases }()
	switch {
	case cmode:
		if len(rest) == 0 {
			return
		}
		var pos []field
		if len(rest) > 2 {
			pos = rest[2:]
		}
		w.code(rest[0], c, pos, false)
	case !smode && len(rest) > 0:
		// A script file: the gate does not read files, but it does read
		// a process substitution it can see (bash <(echo ...)) and a file
		// the script itself wrote.
		if rest[0].proc != nil {
			w.code(field{s: *rest[0].proc}, c, rest[1:], false)
			return
		}
		w.runFile(rest[0], c, rest[1:], false)
	default:
		w.stdinShell(c)
	}
}

// stdinShell judges a shell that reads its script from standard input: a
// here-document, a here-string, or a pipe from echo or printf.
func (w *walker) stdinShell(c *callCtx) {
	switch {
	case c.stdin == nil:
	case c.stdin.known:
		w.code(field{s: c.stdin.text, dyn: strings.IndexByte(c.stdin.text, dynMark) >= 0}, c, nil, true)
	case c.stdin.unseen:
		// As sh -c "$(cmd)" is: the code is the output of a command
		// the gate cannot read.
		w.undecidable(c, "the shell runs code from the output of a command the gate cannot read")
	}
}

// code parses a string again as shell code (bash -c, eval, trap, su -c)
// and walks it. Parts only known at run time become placeholders: a
// placeholder standing as a command word is a dynamic command word.
func (w *walker) code(f field, c *callCtx, pos []field, keepPos bool) {
	if w.done {
		return
	}
	text := f.s
	if strings.TrimSpace(strings.ReplaceAll(text, string(dynMark), "")) == "" {
		if f.dyn || strings.IndexByte(text, dynMark) >= 0 {
			w.undecidable(c, "it runs code built at run time")
		}
		return
	}
	if w.depth >= maxDepth {
		w.undecidable(c, "it nests strings run as code too deep")
		return
	}
	hasDyn := strings.IndexByte(text, dynMark) >= 0
	src := text
	if hasDyn {
		src = strings.ReplaceAll(text, string(dynMark), placeholder)
	}
	// A string run as code is held to the script's limits, and its tree
	// is paid for from the walk's memory: a string in single quotes or a
	// quoted here-document is not nested for the script's own scan.
	big, sc := tooBig(src)
	if big != nil {
		w.undecidable(c, "in a string run as code, "+big.why)
		return
	}
	if !w.charge(2*len(src) + treeBytes*sc.nodes) {
		return
	}
	file, err := parse(src)
	if err != nil {
		line, col, txt := w.where(c.node)
		// Refused, but the walk goes on: a git write elsewhere is named
		// over it.
		w.record(&finding{reason: ReasonParseError, line: line, col: col, text: txt, why: "in a string run as code: " + err.Error()})
		return
	}
	saved := *w
	if len(c.env) > 0 {
		w.inherit = append(slices.Clip(w.inherit), c.env...)
	}
	if w.depth == 0 {
		w.oline, w.ocol, _ = w.where(c.node)
	}
	w.depth++
	w.src = src
	w.placeholders = w.placeholders || hasDyn
	if !keepPos {
		w.pos, w.posKnown = pos, true
	}
	w.stmts(file.Stmts, c.capture)
	w.depth, w.src, w.placeholders, w.cur = saved.depth, saved.src, saved.placeholders, saved.cur
	w.oline, w.ocol = saved.oline, saved.ocol
	w.pos, w.posKnown = saved.pos, saved.posKnown
	w.inherit = saved.inherit
}

func (w *walker) callFunc(name string, body *syntax.Stmt, args []field, c *callCtx) {
	// A call the walk is already inside, with the same words, would walk
	// the same body the same way: nothing new to see. Any other call is
	// followed while the budgets last (budget.go): deep but finite chains
	// are read to their end, and a budget that runs out is a refusal,
	// never an allowance.
	if w.calling == nil {
		w.calling = map[uint64]bool{}
		w.callSeed = maphash.MakeSeed()
	}
	var h maphash.Hash
	h.SetSeed(w.callSeed)
	h.WriteString(name)
	for _, a := range args {
		h.WriteByte(0)
		h.WriteString(a.s)
		if a.dyn {
			h.WriteByte(1)
		}
	}
	sig := h.Sum64()
	if w.calling[sig] {
		return
	}
	if w.defWalk > 0 {
		// Where a function is defined, a call in its body is read once
		// for each words: the callee was read where it was defined, and
		// reading it again for every caller's definition would read a
		// chain of n functions n*n/2 times. Only a certain write counts
		// here, and a call of the function reads its body again anyway.
		if w.defCalled[sig] {
			return
		}
		if w.defCalled == nil {
			w.defCalled = map[uint64]bool{}
		}
		w.defCalled[sig] = true
	}
	// A refusal inside the body says which call ran it: the body's
	// "$@" means little without the call's words.
	if w.caller == "" && w.depth == 0 {
		line, col, text := w.where(c.node)
		w.caller = fmt.Sprintf("in %s, called at line %d, col %d: %s", name, line, col, quoteCommand(text))
		defer func() { w.caller = "" }()
	}
	w.calling[sig] = true
	pos, known, inherit := w.pos, w.posKnown, w.inherit
	w.pos, w.posKnown = args, true
	if len(c.env) > 0 {
		w.inherit = append(slices.Clip(w.inherit), c.env...)
	}
	w.stmt(body, nil, nil)
	w.pos, w.posKnown, w.inherit = pos, known, inherit
	delete(w.calling, sig)
}

func (w *walker) defineAlias(args []field) {
	for _, a := range args {
		i := strings.IndexByte(a.s, '=')
		if i <= 0 {
			continue
		}
		if w.aliases == nil {
			w.aliases = map[string]value{}
		}
		if !w.charge(fieldBytes) {
			return
		}
		w.aliases[a.s[:i]] = value{s: a.s[i+1:], known: !a.dyn}
	}
}

// alias expands an alias the script defined (with expand_aliases on) by
// parsing its value followed by the rest of the command as code, with
// bash's rules: the first word of a value is an alias too, unless it is
// one whose value is being read (alias ls='ls -la'); and a value that ends
// in a blank makes the next word an alias too (alias sudo='sudo '), and
// so on down the chain.
func (w *walker) alias(v value, c *callCtx) {
	ae := aliasExpansion{w: w, active: map[string]bool{}}
	text, blank := ae.word(c.callWord.Lit())
	rest := ""
	if ce := c.call; ce != nil {
		pos := int(c.callWord.End().Offset())
		for k := 1; blank && k < len(ce.Args) && !ae.unknown; k++ {
			wd := ce.Args[k]
			a, b := pos, int(wd.Pos().Offset())
			if wd.Lit() == "" || a > b || b > len(w.src) {
				break // a quoted word, or one with an expansion, is no alias
			}
			var t string
			t, blank = ae.word(wd.Lit())
			text += w.src[a:b] + t
			pos = int(wd.End().Offset())
		}
		if b := int(ce.End().Offset()); pos <= b && b <= len(w.src) {
			rest = w.src[pos:b]
		}
	}
	if ae.unknown {
		w.undecidable(c, "it calls an alias whose value is only known at run time")
		return
	}
	// What bash expanded is expanded: the aliases read here are not
	// expanded again in what they made (alias ls='ls -la' runs ls).
	saved := map[string]value{}
	for name := range ae.used {
		saved[name] = w.aliases[name]
		delete(w.aliases, name)
	}
	w.code(field{s: text + rest}, c, nil, true)
	for name, v := range saved {
		if _, redefined := w.aliases[name]; !redefined {
			w.aliases[name] = v
		}
	}
}

// aliasExpansion expands the words of one command as bash's parser does.
type aliasExpansion struct {
	w       *walker
	active  map[string]bool // aliases whose value is being read
	used    map[string]bool
	unknown bool // an alias whose value only the run knows
}

// word expands word if it is an alias, and says whether what it made
// ends in a blank (the next word is then checked too).
func (ae *aliasExpansion) word(word string) (string, bool) {
	v, ok := ae.w.aliases[word]
	if !ok || ae.active[word] || ae.unknown {
		return word, false
	}
	if !v.known {
		ae.unknown = true
		return word, false
	}
	if ae.used == nil {
		ae.used = map[string]bool{}
	}
	ae.used[word] = true
	ae.active[word] = true
	defer delete(ae.active, word)
	// The value's first word is in the alias's place: checked too.
	lead := len(v.s) - len(strings.TrimLeft(v.s, " \t"))
	end := lead
	for end < len(v.s) && strings.IndexByte(" \t\n;&|()<>'\"\\$`", v.s[end]) < 0 {
		end++
	}
	first, tail := v.s[lead:end], v.s[end:]
	if first == "" || end < len(v.s) && strings.IndexByte(" \t\n;&|", v.s[end]) < 0 {
		return v.s, blankEnd(v.s) // quoted or joined to more: no alias
	}
	t, blank := ae.word(first)
	ae.w.charge(len(t) + len(v.s))
	if tail == "" {
		return v.s[:lead] + t, blank
	}
	return v.s[:lead] + t + tail, blankEnd(tail)
}

func blankEnd(s string) bool { return s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') }

func (w *walker) set(args []field) {
	if len(args) > maxList || !w.charge(len(args)*fieldBytes) {
		w.pos, w.posKnown = nil, false
		return
	}
	for i, a := range args {
		if a.s == "--" {
			w.pos, w.posKnown = slices.Clone(args[i+1:]), true
			return
		}
		if !strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "+") {
			w.pos, w.posKnown = slices.Clone(args[i:]), true
			return
		}
		if a.s == "-o" || a.s == "+o" {
			if i+1 < len(args) && args[i+1].s != "--" {
				return
			}
		}
	}
}

func (w *walker) trap(args []field, c *callCtx) {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0].s, "-") && !args[0].dyn {
		return // trap -l, trap -p, trap - SIG
	}
	// An EXIT trap runs after the script's body: it is walked then, so
	// that the first write named is the first that runs. A later EXIT
	// trap replaces it, as in bash. A trap on any other signal may run at
	// any time: it is walked here.
	sigs := args[1:]
	onExit := len(sigs) > 0
	for _, s := range sigs {
		if s.dyn || s.s != "EXIT" && s.s != "0" && s.s != "SIGEXIT" {
			onExit = false
		}
	}
	if onExit && w.depth == 0 {
		w.exitTrap = &deferred{code: args[0], c: *c}
		return
	}
	w.code(args[0], c, nil, true)
}

// deferred is code that runs later: the EXIT trap.
type deferred struct {
	code field
	c    callCtx
}

// atExit walks the EXIT trap the script set, once its body has run.
func (w *walker) atExit() {
	if t := w.exitTrap; t != nil && !w.done {
		w.exitTrap = nil
		w.code(t.code, &t.c, nil, true)
	}
}

func (w *walker) su(name string, args []field, c *callCtx) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-c" || s == "--command" || s == "--session-command" ||
			len(s) > 2 && s[0] == '-' && s[1] != '-' && s[len(s)-1] == 'c':
			if i+1 < len(args) {
				w.code(args[i+1], c, nil, false)
			}
			return
		case strings.HasPrefix(s, "--command=") || strings.HasPrefix(s, "--session-command="):
			f := args[i]
			f.s = s[strings.IndexByte(s, '=')+1:]
			w.code(f, c, nil, false)
			return
		case s == "-s" || s == "--shell" || s == "-g" || s == "--group" || s == "-G" || s == "--supp-group" || s == "-w" || s == "--whitelist-environment":
			i++
		case name == "runuser" && (s == "-u" || s == "--user"):
			j := i + 2
			if j < len(args) && args[j].s == "--" {
				j++
			}
			inner := *c
			inner.noFunc = true
			inner.callWord = nil
			if j < len(args) {
				w.exec(args[j:], &inner)
			}
			return
		}
	}
	w.stdinShell(c)
}

func (w *walker) sudo(args []field, c *callCtx, sp optSpec, noRun string) {
	i, ok := skipOpts(args, sp)
	shellMode := false
	for _, a := range args[:i] {
		s := a.s
		if strings.HasPrefix(s, "--") {
			switch s {
			case "--edit", "--list", "--validate", "--version", "--remove-timestamp", "--help":
				return
			case "--shell", "--login":
				shellMode = true
			}
			continue
		}
		if len(s) > 1 && s[0] == '-' {
			for j := 1; j < len(s); j++ {
				if strings.IndexByte(sp.short, s[j]) >= 0 {
					break
				}
				if strings.IndexByte(noRun, s[j]) >= 0 {
					return
				}
				if s[j] == 's' || s[j] == 'i' {
					shellMode = true
				}
			}
		}
	}
	if !ok {
		w.dynamicCommand(args[i:], c)
		return
	}
	for i < len(args) {
		name, v, ok := assignment(args[i])
		if !ok {
			break
		}
		c.env = append(slices.Clip(c.env), envVar{name: name, v: v, raw: v.s})
		i++
	}
	if i >= len(args) {
		if shellMode {
			w.stdinShell(c)
		}
		return
	}
	w.exec(args[i:], c)
}

func (w *walker) env(args []field, c *callCtx) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		s := a.s
		if name, v, ok := assignment(a); ok {
			c.env = append(slices.Clip(c.env), envVar{name: name, v: v, raw: v.s})
			continue
		}
		if a.dyn {
			w.dynamicCommand(args[i:], c)
			return
		}
		switch {
		case s == "--":
		case s == "-a" || s == "--argv0":
			// newer coreutils: the command's argv[0]
			if i+1 < len(args) {
				f := args[i+1]
				c.argv0 = &f
			}
			i++
		case strings.HasPrefix(s, "--argv0="):
			f := a
			f.s = s[len("--argv0="):]
			c.argv0 = &f
		case s == "-u" || s == "--unset" || s == "-C" || s == "--chdir":
			i++
		case s == "-S" || s == "--split-string":
			if i+1 < len(args) {
				w.code(joinFields(args[i+1:]), c, nil, true)
			}
			return
		case strings.HasPrefix(s, "--split-string="):
			f := joinFields(append([]field{{s: s[len("--split-string="):], dyn: a.dyn}}, args[i+1:]...))
			w.code(f, c, nil, true)
			return
		case strings.HasPrefix(s, "--") || s == "-":
		case strings.HasPrefix(s, "-"):
			if k := strings.IndexByte(s, 'S'); k > 0 {
				f := joinFields(append([]field{{s: s[k+1:], dyn: a.dyn}}, args[i+1:]...))
				w.code(f, c, nil, true)
				return
			}
			if last := s[len(s)-1]; last == 'u' || last == 'C' || last == 'a' {
				if last == 'a' && i+1 < len(args) {
					f := args[i+1]
					c.argv0 = &f
				}
				i++
			}
		default:
			w.exec(args[i:], c)
			return
		}
	}
}

func (w *walker) flock(args []field, c *callCtx) {
	i, ok := skipOpts(args, optSpec{short: "wEc", long: []string{"timeout", "conflict-exit-code", "command"}})
	for j := 0; j < i && j < len(args); j++ {
		if s := args[j].s; s == "-c" || s == "--command" {
			if j+1 < len(args) {
				w.code(args[j+1], c, nil, false)
			}
			return
		}
	}
	if !ok {
		w.dynamicCommand(args[i:], c)
		return
	}
	// flock FILE -c STRING or flock FILE CMD ARGS...
	if i+1 < len(args) {
		if s := args[i+1].s; s == "-c" || s == "--command" {
			if i+2 < len(args) {
				w.code(args[i+2], c, nil, false)
			}
			return
		}
		w.exec(args[i+1:], c)
	}
}

func (w *walker) xargs(args []field, c *callCtx) {
	repl := ""
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		s := a.s
		if a.dyn {
			w.dynamicCommand(args[i:], c)
			return
		}
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		switch {
		case s == "-I" || s == "--replace":
			if s == "--replace" {
				repl = "{}"
				continue
			}
			if i+1 < len(args) {
				repl = args[i+1].s
			}
			i++
		case strings.HasPrefix(s, "--replace="):
			repl = s[len("--replace="):]
		case strings.HasPrefix(s, "-I"):
			repl = s[2:]
		case strings.HasPrefix(s, "-i"):
			repl = s[2:]
			if repl == "" {
				repl = "{}"
			}
		case strings.HasPrefix(s, "--"):
			if !strings.Contains(s, "=") && slices.Contains([]string{"arg-file", "delimiter", "eof", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}, s[2:]) {
				i++
			}
		default:
			// -e, -l take an attached value only; -a -d -E -L -n -P -s a value.
			for j := 1; j < len(s); j++ {
				if s[j] == 'e' || s[j] == 'l' {
					break
				}
				if strings.IndexByte("adELnPs", s[j]) >= 0 {
					if j == len(s)-1 {
						i++
					}
					break
				}
			}
		}
	}
	if i >= len(args) {
		return // xargs alone runs echo
	}
	if !w.charge((len(args) - i) * fieldBytes) {
		return
	}
	rest := slices.Clone(args[i:])
	if repl != "" {
		for k := range rest {
			if strings.Contains(rest[k].s, repl) {
				rest[k].s = strings.ReplaceAll(rest[k].s, repl, string(dynMark))
				rest[k].dyn = true
			}
		}
	} else {
		c.moreArgs = true
	}
	c.stdin = nil
	w.exec(rest, c)
}

func (w *walker) findExec(args []field, c *callCtx) {
	for i := 0; i < len(args); i++ {
		switch args[i].s {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			if !w.charge((j - i) * fieldBytes) {
				return
			}
			cmd := slices.Clone(args[i+1 : j])
			for k := range cmd {
				if strings.Contains(cmd[k].s, "{}") {
					cmd[k].s = strings.ReplaceAll(cmd[k].s, "{}", string(dynMark))
					cmd[k].dyn = true
				}
			}
			inner := *c
			inner.env = nil
			w.exec(cmd, &inner)
			if w.done {
				return
			}
			i = j
		}
	}
}

func echoOutput(args []field) (string, bool) {
	i, escapes := 0, false
	for i < len(args) && len(args[i].s) > 1 && args[i].s[0] == '-' && strings.Trim(args[i].s[1:], "neE") == "" {
		escapes = escapes || strings.Contains(args[i].s, "e")
		i++
	}
	text := joinFields(args[i:]).s
	if escapes {
		text = ansiC(text) // echo -e '\x67it'
	}
	return text + "\n", true
}

// printfOutput renders what printf prints, as bash's printf does (the
// format reused while arguments remain, every conversion and escape), with
// mvdan.cc/sh's own implementation of it; a dynamic word or a format it
// refuses is not followed. made is what rendering it made, followed or
// not (a width of 999999 makes a megabyte).
func printfOutput(args []field) (text string, made int, ok bool) {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return "", 0, false
	}
	for _, a := range args {
		if a.dyn {
			return "", 0, false
		}
	}
	format := args[0].s
	rest := make([]string, len(args)-1)
	for i, a := range args[1:] {
		rest[i] = a.s
	}
	var b strings.Builder
	// A Config of its own each call: Format with a nil Config prepares
	// and writes one shared package-level Config, a data race between
	// decisions made at once (found by TestConcurrent under -race).
	cfg := &expand.Config{}
	for round := 0; round < 1024; round++ {
		out, n, err := expand.Format(cfg, format, rest)
		made += 2 * len(out)
		if err != nil {
			return "", made, false
		}
		b.WriteString(out)
		if b.Len() > maxValue {
			return "", made, false
		}
		if n == 0 || n >= len(rest) {
			break
		}
		rest = rest[n:]
	}
	// printf stops at a NUL byte in what it prints.
	text, _, _ = strings.Cut(b.String(), "\x00")
	return text, made, true
}

// onPath finds a file the script wrote that bash would run for name: in
// a directory of the PATH the script set, searched in order up to the
// first directory only the run knows (which may hold a program of that
// name, as any directory of the environment's PATH may).
func (w *walker) onPath(name string, c *callCtx) (field, bool) {
	path, ok := w.rawEnv(c, "PATH")
	if !ok {
		return field{}, false
	}
	for dir := range strings.SplitSeq(path, ":") {
		if strings.IndexByte(dir, dynMark) >= 0 || !w.tick(1) {
			return field{}, false
		}
		if dir == "" {
			dir = "." // an empty element is the current directory
		}
		f := dir + "/" + name
		if _, ok := w.files[cleanPath(f)]; ok {
			return field{s: f}, true
		}
	}
	return field{}, false
}

// rawEnv is a variable of the command's environment as envLookup finds
// it, with its known parts kept around the unknown ones.
func (w *walker) rawEnv(c *callCtx, name string) (string, bool) {
	for _, env := range [][]envVar{c.env, w.inherit} {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].name == name {
				return env[i].raw, true
			}
		}
	}
	if v, ok := w.vars[name]; ok && !v.arr {
		if !v.known && v.s == "" {
			return string(dynMark), true
		}
		return v.s, true
	}
	return "", false
}

// runFile reads a script file the script itself wrote earlier; other
// files are not seen.
func (w *walker) runFile(f field, c *callCtx, args []field, keepPos bool) {
	if f.dyn || w.files == nil {
		return
	}
	content, ok := w.files[cleanPath(f.s)]
	if !ok {
		return
	}
	w.code(field{s: content.text, dyn: strings.IndexByte(content.text, dynMark) >= 0}, c, args, keepPos)
}
