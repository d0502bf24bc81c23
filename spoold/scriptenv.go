package spoold

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A script job's spec may set only the names of an allowlist in its env
// (docs/spoold.md, "A script job's environment"). The gate judges the
// script's text; a variable the spec sets reaches bash and git unseen, and
// too many of them choose what an allowed command runs: PATH picks which
// `git` runs, HOME, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GIT_CONFIG_COUNT
// and GIT_CONFIG_PARAMETERS give git a core.fsmonitor (run by `git
// status`), GIT_DIR points it at another repository's configuration,
// GIT_EXTERNAL_DIFF runs a program on `git diff`, BASH_ENV runs a file
// before the script. No list of such names can be known complete, so the
// rule is the other way round: only names that choose no program are
// passed, and the daemon's own base (PATH, HOME... of the operator) stands.

// scriptEnvNames and scriptEnvPrefixes are what every script job's spec
// may set: the locale, the time zone, the terminal's size and colour, and
// VMSPOOL_*, the names this project's clients pass data in (the Open WebUI
// tool's VMSPOOL_TASK).
var (
	scriptEnvNames    = []string{"LANG", "LANGUAGE", "TZ", "NO_COLOR", "COLUMNS", "LINES"}
	scriptEnvPrefixes = []string{"LC_", "VMSPOOL_"}
)

// unsafeEnv are names and prefixes (ending in *) an operator may not add
// to the allowlist: each makes bash, git, the dynamic loader or a program
// git starts run something else, or read configuration from elsewhere.
var unsafeEnv = []string{
	"PATH", "HOME", "ENV", "IFS", "CDPATH", "SHELL", "SHELLOPTS", "BASHOPTS", "PS1", "PS2", "PS3", "PS4",
	"PROMPT_COMMAND", "GLOBIGNORE", "EXECIGNORE", "POSIXLY_CORRECT", "PAGER", "EDITOR", "VISUAL",
	"LESSOPEN", "LESSCLOSE", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "TERMINFO", "TMPDIR",
	"GIT*", "BASH*", "LD_*", "XDG_*", "SSH_*", "SPOOL_*",
}

// ScriptEnv is the allowlist of a script job's env: the defaults and what
// the operator added (Config.ScriptEnv).
type ScriptEnv struct {
	names    map[string]bool
	prefixes []string
}

// NewScriptEnv is the default allowlist with extra names added; an entry
// ending in * is a prefix. An entry that is no variable name, or that names
// something unsafeEnv lists (or a prefix covering one), is an error.
func NewScriptEnv(extra []string) (*ScriptEnv, error) {
	a := &ScriptEnv{names: map[string]bool{}, prefixes: append([]string(nil), scriptEnvPrefixes...)}
	for _, n := range scriptEnvNames {
		a.names[n] = true
	}
	for _, e := range extra {
		name, prefix := strings.CutSuffix(e, "*")
		if !syntax.ValidName(name) {
			return nil, fmt.Errorf("script env %q: not a variable name (letters, digits and _, not starting with a digit; a trailing * for a prefix)", e)
		}
		for _, u := range unsafeEnv {
			un, uprefix := strings.CutSuffix(u, "*")
			clash := name == un ||
				uprefix && strings.HasPrefix(name, un) ||
				prefix && strings.HasPrefix(un, name)
			if clash {
				return nil, fmt.Errorf("script env %q: %s may choose what an allowed command runs, unseen by the gate; it is never passed to a script job (docs/spoold.md)", e, u)
			}
		}
		if prefix {
			a.prefixes = append(a.prefixes, name)
		} else {
			a.names[name] = true
		}
	}
	return a, nil
}

// Allows says whether a script job's spec may set name to value. A locale
// name's value must be a locale's name: one with a slash is a path, and
// glibc would load that file as locale data.
func (a *ScriptEnv) Allows(name, value string) bool {
	if !syntax.ValidName(name) {
		return false
	}
	ok := a.names[name]
	for _, p := range a.prefixes {
		ok = ok || strings.HasPrefix(name, p)
	}
	if ok && (name == "LANG" || name == "LANGUAGE" || strings.HasPrefix(name, "LC_")) {
		return strings.Trim(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.@:-") == ""
	}
	return ok
}
