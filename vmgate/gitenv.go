package vmgate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// envSetting is one setting git takes from its environment, as git -c
// KEY=VALUE would give it.
type envSetting struct {
	via string // the variable that carries it: GIT_CONFIG_KEY_0, GIT_CONFIG_PARAMETERS
	kv  field  // KEY=VALUE, or KEY alone (a boolean true), as -c's argument
	bad string // why the settings cannot be read: a doubt
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
	out := w.fileConfig(c)
	keys, ok := w.configKeys(c)
	if !ok {
		return append(out, envSetting{via: "GIT_CONFIG_COUNT", bad: fmt.Sprintf("sets more settings than the %d the gate reads", maxEnvSettings)})
	}
	for _, n := range keys {
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
		switch {
		case strings.IndexByte(f.s, dynMark) >= 0 && !ok:
			return append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", bad: "holds settings only known at run time"})
		case !ok:
			return append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", bad: "does not read as git's list of settings"})
		case len(pairs) > maxEnvSettings:
			return append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", bad: fmt.Sprintf("holds more settings than the %d the gate reads", maxEnvSettings)})
		}
		for _, kv := range pairs {
			out = append(out, envSetting{via: "GIT_CONFIG_PARAMETERS", kv: field{s: kv, dyn: strings.IndexByte(kv, dynMark) >= 0}})
		}
	}
	return out
}

// fileConfig returns the settings of the configuration files git would
// read that the script itself wrote, where the environment the script
// set points git at them (GIT_CONFIG_SYSTEM, GIT_CONFIG_GLOBAL, HOME's
// .gitconfig, XDG_CONFIG_HOME's git/config), in git's order: a
// configuration the script writes and hands to git is judged as its
// settings given with -c are. Writing the usual places is refused
// already (gitfiles.go); a file the script did not write is not seen.
func (w *walker) fileConfig(c *callCtx) []envSetting {
	if w.files == nil {
		return nil
	}
	var out []envSetting
	read := func(via, name string) {
		f, ok := w.files[cleanPath(name)]
		if !ok || !w.tick(1) {
			return
		}
		w.charge(2 * len(f.text))
		settings, ok := parseConfigFile(f.text)
		switch {
		case !ok:
			out = append(out, envSetting{via: via, bad: "names a configuration file the script wrote that does not read as git's"})
			return
		case len(settings) > maxEnvSettings:
			out = append(out, envSetting{via: via, bad: fmt.Sprintf("names a configuration file the script wrote with more settings than the %d the gate reads", maxEnvSettings)})
			return
		}
		for _, kv := range settings {
			out = append(out, envSetting{via: via, kv: field{s: kv}})
		}
	}
	known := func(name string) (string, bool) {
		v, ok := w.rawEnv(c, name)
		if !ok || v == "" || strings.IndexByte(v, dynMark) >= 0 {
			return "", false
		}
		return v, true
	}
	if p, ok := known("GIT_CONFIG_SYSTEM"); ok {
		read("GIT_CONFIG_SYSTEM", p)
	}
	if p, ok := known("GIT_CONFIG_GLOBAL"); ok {
		read("GIT_CONFIG_GLOBAL", p)
	} else {
		if x, ok := known("XDG_CONFIG_HOME"); ok {
			read("XDG_CONFIG_HOME", x+"/git/config")
		} else if h, ok := known("HOME"); ok {
			read("HOME", h+"/.config/git/config")
		}
		if h, ok := known("HOME"); ok {
			read("HOME", h+"/.gitconfig")
		}
	}
	return out
}

// parseConfigFile reads the text of a git configuration file as git
// does, well enough to name its settings: [section], [section "sub"] and
// [section.sub] headers (a setting may follow on the header's line),
// NAME = VALUE or NAME alone (a boolean true), # and ; comments, double
// quotes and backslash escapes in values, a backslash at a line's end
// going on. It returns each as section[.sub].name=value, and false where
// it cannot read a line: a doubt, not a pass.
func parseConfigFile(text string) ([]string, bool) {
	var out []string
	section := ""
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "[") {
			var ok bool
			if section, line, ok = configHeader(line); !ok {
				return nil, false
			}
			line = strings.TrimSpace(line)
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if section == "" {
			return nil, false // a setting before any section: git refuses the file
		}
		name, val, hasVal := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, " \t\"") {
			return nil, false
		}
		if !hasVal {
			out = append(out, section+"."+name)
			continue
		}
		// A value goes on past a backslash at the line's end.
		for strings.HasSuffix(val, `\`) && i+1 < len(lines) {
			i++
			val = val[:len(val)-1] + lines[i]
		}
		v, ok := configValue(val)
		if !ok {
			return nil, false
		}
		out = append(out, section+"."+name+"="+v)
	}
	return out, true
}

// configHeader reads a section header at the start of line: [section],
// [section.sub] or [section "sub"] (in whose quotes \" and \\ stand for
// " and \, and ] is a character), and returns the section's name and
// what follows the header.
func configHeader(line string) (string, string, bool) {
	i := 1
	for i < len(line) && line[i] != ']' && line[i] != ' ' && line[i] != '\t' {
		i++
	}
	name := line[1:i]
	if name == "" || i >= len(line) {
		return "", "", false
	}
	if line[i] == ']' {
		return name, line[i+1:], true
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i >= len(line) || line[i] != '"' {
		return "", "", false
	}
	var sub strings.Builder
	for i++; i < len(line); i++ {
		switch line[i] {
		case '\\':
			if i+1 >= len(line) {
				return "", "", false
			}
			i++
			sub.WriteByte(line[i])
		case '"':
			if i+1 >= len(line) || line[i+1] != ']' {
				return "", "", false
			}
			return name + "." + sub.String(), line[i+2:], true
		default:
			sub.WriteByte(line[i])
		}
	}
	return "", "", false
}

// configValue reads a value as git does: blanks around it dropped,
// double quotes grouping, \" \\ \n \t \b escapes, a comment outside
// quotes ending it.
func configValue(s string) (string, bool) {
	var b strings.Builder
	quoted := false
	pending := 0 // blanks kept only if more follows
	s = strings.TrimLeft(s, " \t")
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case !quoted && (ch == '#' || ch == ';'):
			return b.String(), true
		case !quoted && (ch == ' ' || ch == '\t'):
			pending++
			continue
		case ch == '"':
			quoted = !quoted
			continue
		case ch == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			i++
			switch s[i] {
			case 'n':
				ch = '\n'
			case 't':
				ch = '\t'
			case 'b':
				ch = '\b'
			case '"', '\\':
				ch = s[i]
			default:
				return "", false // git: bad config line
			}
		}
		for ; pending > 0; pending-- {
			b.WriteByte(' ')
		}
		b.WriteByte(ch)
	}
	if quoted {
		return "", false
	}
	return b.String(), true
}

// configKeys lists, in git's order, the n of the GIT_CONFIG_KEY_<n> set
// for the command or earlier, below GIT_CONFIG_COUNT when the script set
// it to a number. git reads GIT_CONFIG_KEY_0, never GIT_CONFIG_KEY_00.
// More than maxEnvSettings is a doubt, never a list cut short.
func (w *walker) configKeys(c *callCtx) ([]int, bool) {
	var ns []int
	add := func(name string) {
		s, ok := strings.CutPrefix(name, "GIT_CONFIG_KEY_")
		if !ok {
			return
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && strconv.Itoa(n) == s {
			ns = append(ns, n)
		}
	}
	w.tick(len(c.env) + len(w.inherit))
	for _, e := range c.env {
		add(e.name)
	}
	for _, e := range w.inherit {
		add(e.name)
	}
	if w.gitKeys {
		w.tick(len(w.vars))
		for name := range w.vars {
			add(name)
		}
	}
	if len(ns) == 0 {
		return nil, true
	}
	if f, ok := w.envLookup(c, "GIT_CONFIG_COUNT"); ok && !f.dyn {
		count, err := strconv.ParseUint(f.s, 10, 31)
		if err != nil {
			return nil, true // git: bogus count, it dies and runs nothing
		}
		ns = slices.DeleteFunc(ns, func(n int) bool { return uint64(n) >= count })
	}
	w.charge(len(ns) * 8)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	return ns, len(ns) <= maxEnvSettings
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
