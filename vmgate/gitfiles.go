package vmgate

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A write into git's own configuration or hooks is a git write in
// disguise: it changes what every later git command runs, the allowed
// reads of the same script (a core.fsmonitor runs on git status, a hook
// when the index is refreshed) and the host's commit tool alike, without
// a git command of its own for the gate to judge. So a redirection, tee,
// cp, mv, ln or install whose destination is one of these files is
// refused as a git write (docs/gate.md, "Git's own files"):
//
//   - a repository's configuration: a path whose last element is config
//     or config.worktree below a .git directory (.git/config,
//     .git/modules/m/config, $REPO/.git/config), or below $GIT_DIR when
//     the script set it;
//   - its hooks: anything below a hooks directory below .git
//     (.git/hooks/pre-commit, cp x .git/hooks/);
//   - the user's and the system's configuration: ~/.gitconfig and
//     ~/.config/git/config, as ~, $HOME or any directory only the run
//     knows spells them (which may be the home), $HOME/... as the script
//     set it, /root/..., /home/USER/..., /etc/gitconfig.
//
// Reading them (cat .git/config), and writing any other file (.gitignore,
// .git/info/exclude), stays allowed. A relative .gitconfig is a file of
// the project (a dotfiles repository's), not the user's: the gate does
// not know the current directory.
type gitFile string

const (
	gitFileConfig gitFile = ".git/config"
	gitFileHooks  gitFile = ".git/hooks"
	gitFileUser   gitFile = "~/.gitconfig"
)

// gitFileOf says which of git's own files a destination is, or "".
func (w *walker) gitFileOf(f field, dir bool) gitFile {
	s := f.s
	dynPrefix := false
	if i := strings.LastIndexByte(s, dynMark); i >= 0 {
		// Only what follows the last unknown part is known of the path.
		s, dynPrefix = s[i+1:], true
	}
	if s == "" {
		return ""
	}
	p := path.Clean(s)
	if _, gitDir := w.vars["GIT_DIR"]; !gitDir && !strings.Contains(p, "git") {
		// Most destinations (/dev/null, out.txt): nothing to split.
		return ""
	}
	elems := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, e := range elems {
		if e != ".git" {
			continue
		}
		rest := elems[i+1:]
		for j, r := range rest {
			if r == "hooks" && (j+1 < len(rest) || dir) {
				return gitFileHooks
			}
		}
		if n := len(rest); n > 0 && (rest[n-1] == "config" || rest[n-1] == "config.worktree") {
			return gitFileConfig
		}
	}
	if !f.dyn {
		if gd, ok := w.vars["GIT_DIR"]; ok && gd.known && !gd.arr && gd.s != "" {
			g := path.Clean(gd.s)
			switch {
			case p == g+"/config", p == g+"/config.worktree":
				return gitFileConfig
			case strings.HasPrefix(p, g+"/hooks/"), dir && p == g+"/hooks":
				return gitFileHooks
			}
		}
	}
	isUser := func(home string) bool {
		home = path.Clean(home)
		return p == path.Join(home, ".gitconfig") || p == path.Join(home, ".config/git/config")
	}
	switch {
	case dynPrefix && strings.HasPrefix(s, "/") && (p == "/.gitconfig" || p == "/.config/git/config"):
		// ~/.gitconfig, $HOME/.gitconfig, "$H/.gitconfig": a directory
		// only the run knows may be the home.
		return gitFileUser
	case f.dyn:
		return ""
	case p == "/etc/gitconfig", isUser("/root"):
		return gitFileUser
	case len(elems) == 3 && elems[0] == "home" && elems[2] == ".gitconfig",
		len(elems) == 5 && elems[0] == "home" && strings.Join(elems[2:], "/") == ".config/git/config":
		return gitFileUser
	}
	if h, ok := w.vars["HOME"]; ok && h.known && !h.arr && h.s != "" && isUser(h.s) {
		return gitFileUser
	}
	if x, ok := w.vars["XDG_CONFIG_HOME"]; ok && x.known && !x.arr && x.s != "" && p == path.Join(path.Clean(x.s), "git/config") {
		return gitFileUser
	}
	return ""
}

// writesGitFile refuses a write into one of git's own files (gitFileOf);
// node is what is quoted: the command, or the redirection.
func (w *walker) writesGitFile(f field, dir bool, node syntax.Node) {
	if w.probing > 0 {
		return
	}
	which := w.gitFileOf(f, dir)
	if which == "" {
		return
	}
	var why string
	switch which {
	case gitFileHooks:
		why = "it writes into .git/hooks, whose programs git runs on its own (on commit, on checkout, when git status refreshes the index), here and in the host's commit tool; leave hooks to the host"
	case gitFileConfig:
		why = "it writes .git/config, git's own configuration, which changes what every later git command runs (an fsmonitor, a pager, an alias), here and in the host's commit tool; to configure one git command that only reads, give it `git -c KEY=VALUE`"
	default:
		why = "it writes the user's git configuration (" + string(which) + "), which changes what every later git command runs; to configure one git command that only reads, give it `git -c KEY=VALUE`"
	}
	w.find(&callCtx{node: node}, ReasonGitWrite, string(which), why)
}

// destinations are what cp, mv, ln and install write: the last operand,
// or -t DIR's, and, where that may be a directory, each source's name
// below it (cp config .git/ writes .git/config).
func destinations(args []field) []field {
	var ops []field
	var dir *field
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a.s == "-t" && !a.dyn && i+1 < len(args):
			dir = &args[i+1]
			i++
		case strings.HasPrefix(a.s, "--target-directory=") && !a.dyn:
			dir = &field{s: a.s[len("--target-directory="):]}
		case a.s == "--" && !a.dyn:
			ops = append(ops, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a.s, "-") && !a.dyn:
		default:
			ops = append(ops, a)
		}
	}
	if dir == nil {
		if len(ops) < 2 {
			return nil
		}
		dir, ops = &ops[len(ops)-1], ops[:len(ops)-1]
	}
	out := []field{*dir}
	for _, src := range ops {
		if !src.dyn {
			out = append(out, field{s: dir.s + "/" + path.Base(src.s), dyn: dir.dyn})
		}
	}
	return out
}

func (w *walker) gitFileDestinations(args []field, c *callCtx) {
	for _, d := range destinations(args) {
		w.writesGitFile(d, true, c.node)
	}
}
