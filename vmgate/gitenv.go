package vmgate

import (
	"slices"
	"strconv"
	"strings"
)

// envSetting is one setting git takes from its environment, as git -c
// KEY=VALUE would give it.
type envSetting struct {
	via string // the variable that carries it: GIT_CONFIG_KEY_0, GIT_CONFIG_PARAMETERS
	kv  field  // KEY=VALUE, or KEY alone (a boolean true), as -c's argument
	bad bool   // GIT_CONFIG_PARAMETERS that does not read as git's format
}

// maxEnvSettings bounds the settings read of one invocation's
// environment: past it, the rest is one doubt.
const maxEnvSettings = 256

// envConfig returns the settings git would read from the command's
// environment as the script sets it (for the command, by export, env,
// declare -x or an earlier assignment), in git's order: first
// GIT_CONFIG_COUNT's pairs (GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>),
// then GIT_CONFIG_PARAMETERS.
//
// What the script does not set is not seen, as any environment is not.
// A GIT_CONFIG_COUNT the script does not set to a number may be the
// environment's, so every key the script set counts then; a
// GIT_CONFIG_VALUE_<n> it does not set is only known at run time.
func (w *walker) envConfig(c *callCtx) []envSetting {
	var out []envSetting
	for _, n := range w.configKeys(c) {
		name := "GIT_CONFIG_KEY_" + strconv.Itoa(n)
		key, _ := w.envLookup(c, name)
		val, ok := w.envLookup(c, "GIT_CONFIG_VALUE_"+strconv.Itoa(n))
		if !ok {
			val = field{s: string(dynMark), dyn: true}
		}
		if !w.charge(len(key.s) + len(val.s) + fieldBytes) {
			break
		}
		out = append(out, envSetting{via: name, kv: field{s: key.s + "=" + val.s, dyn: key.dyn || val.dyn}})
	}
	if f, ok := w.envLookup(c, "GIT_CONFIG_PARAMETERS"); ok {
		w.charge(2 * len(f.s))
		pairs, ok := parseConfigParameters(f.s)
		if !ok || len(pairs) > maxEnvSettings {
			return append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", bad: true})
		}
		for _, kv := range pairs {
			out = append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", kv: field{s: kv, dyn: strings.IndexByte(kv, dynMark) >= 0}})
		}
	}
	return out
}

// configKeys lists, in git's order, the n of the GIT_CONFIG_KEY_<n> set
// for the command or earlier, below GIT_CONFIG_COUNT when the script set
// it to a number. git reads GIT_CONFIG_KEY_0, never GIT_CONFIG_KEY_00.
func (w *walker) configKeys(c *callCtx) []int {
	var ns []int
	add := func(name string) {
		s, ok := strings.CutPrefix(name, "GIT_CONFIG_KEY_")
		if !ok {
			return
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && strconv.Itoa(n) == s && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	for _, e := range c.env {
		add(e.name)
	}
	if w.gitKeys {
		w.tick(len(w.vars))
		for name := range w.vars {
			add(name)
		}
	}
	if len(ns) == 0 {
		return nil
	}
	if f, ok := w.envLookup(c, "GIT_CONFIG_COUNT"); ok && !f.dyn {
		count, err := strconv.ParseUint(f.s, 10, 31)
		if err != nil {
			return nil // git: bogus count, it dies and runs nothing
		}
		ns = slices.DeleteFunc(ns, func(n int) bool { return uint64(n) >= count })
	}
	slices.Sort(ns)
	if len(ns) > maxEnvSettings {
		ns = ns[:maxEnvSettings]
	}
	return ns
}

// parseConfigParameters reads GIT_CONFIG_PARAMETERS as git does
// (config.c, parse_config_env_list): entries separated by blanks, each
// 'KEY=VALUE' (the old form, as git -c writes it in git before 2.31) or
// 'KEY'='VALUE' or 'KEY'= (the new); a quote or a ! inside is closed,
// escaped with a backslash and reopened, as sq_quote writes them. It
// returns each as KEY=VALUE (or KEY, a boolean true), and false where
// git would refuse the whole list.
func parseConfigParameters(s string) ([]string, bool) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		if s == "" {
			return out, true
		}
		key, rest, ok := sqDequoteStep(s)
		if !ok {
			return nil, false
		}
		switch {
		case rest == "" || isSpace(rest[0]):
			out = append(out, key) // the old form, KEY=VALUE in one
		case rest[0] == '=':
			rest = rest[1:]
			switch {
			case rest == "" || isSpace(rest[0]):
				out = append(out, key)
			case rest[0] == '\'':
				var val string
				if val, rest, ok = sqDequoteStep(rest); !ok || rest != "" && !isSpace(rest[0]) {
					return nil, false
				}
				out = append(out, key+"="+val)
			default:
				return nil, false
			}
		default:
			return nil, false
		}
		s = rest
	}
}

// sqDequoteStep reads one single-quoted word at the start of s, as git's
// sq_dequote_step (a quote closed, a backslash before a quote or a !,
// and a quote reopened stand for that character); the word ends at the
// first character after a closing quote that is not such an escape.
func sqDequoteStep(s string) (word, rest string, ok bool) {
	if s == "" || s[0] != '\'' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 < len(s) && s[i+1] == '\\' && (s[i+2] == '\'' || s[i+2] == '!') && s[i+3] == '\'' {
			b.WriteByte(s[i+2])
			i += 3
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false // no closing quote
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
