package vmgate

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Rules are denials beyond git, loaded from a rules file. The format, one
// rule a line (docs/gate.md):
//
//	# a comment
//	deny COMMAND [SUBCOMMAND] [: MESSAGE]
//
// COMMAND matches the command's name (after paths, quotes and wrappers
// such as sudo are taken off); SUBCOMMAND, when given, matches the
// command's first argument that does not start with "-". MESSAGE is what
// the agent reads instead of the default.
type Rules struct {
	file  string
	rules []rule
}

type rule struct {
	cmd, sub string
	msg      string
	file     string
	line     int
}

func (r *rule) message() string {
	what := r.cmd
	if r.sub != "" {
		what += " " + r.sub
	}
	if r.msg != "" {
		return fmt.Sprintf("%s (rule %s:%d)", r.msg, r.file, r.line)
	}
	return fmt.Sprintf("the gate's rules deny %s here (rule %s:%d)", what, r.file, r.line)
}

// ParseRules parses the text of a rules file; name is used in errors and
// in the refusals' "rule FILE:LINE". The package reads no file: the
// command that takes --rules reads it (cmd/vmgate) and hands its text here.
func ParseRules(name string, data []byte) (*Rules, error) {
	rs := &Rules{file: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		head, msg, _ := strings.Cut(line, ":")
		words := strings.Fields(head)
		if len(words) < 2 || len(words) > 3 || words[0] != "deny" {
			return nil, fmt.Errorf("%s:%d: want `deny COMMAND [SUBCOMMAND] [: MESSAGE]`", name, n)
		}
		r := rule{cmd: words[1], msg: strings.TrimSpace(msg), file: name, line: n}
		if len(words) == 3 {
			r.sub = words[2]
		}
		if strings.ContainsAny(head, "/'\"\\$`") {
			return nil, fmt.Errorf("%s:%d: a command is a plain name, without paths or quotes", name, n)
		}
		rs.rules = append(rs.rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return rs, nil
}

// Len is the number of rules.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.rules)
}

// policy applies the rules to the command base with arguments args.
func (w *walker) policy(base string, args []field, c *callCtx) {
	sub, subKnown := "", true
	for _, a := range args {
		if a.dyn {
			subKnown = false
			break
		}
		if !strings.HasPrefix(a.s, "-") {
			sub = a.s
			break
		}
	}
	for i := range w.g.rules.rules {
		r := &w.g.rules.rules[i]
		if r.cmd != base {
			continue
		}
		if r.sub != "" && (!subKnown || r.sub != sub) {
			continue
		}
		line, col, text := w.where(c.node)
		w.record(&finding{reason: ReasonPolicy, line: line, col: col, text: text, rule: r})
		return
	}
}
