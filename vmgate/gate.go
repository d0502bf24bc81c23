package vmgate

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// DefaultCommitTool is the name of the host-side tool the refusal message
// sends the agent to.
const DefaultCommitTool = "git_commit"

// CommitToolEnv is the environment variable that names the commit tool of
// the client a job runs for (the Open WebUI tool's commit_tool valve, in
// the spec's env): spoold's refusal of the job's script names it, and
// `vmgate check` and `vmgate run` take it as --commit-tool's default, so
// the agent inside the job reads the same name. It changes the message
// only, never the decision.
const CommitToolEnv = "VMSPOOL_COMMIT_TOOL"

// ValidToolName reports whether name may name a commit tool in the
// refusal: a tool's name as a model calls it (a letter or _, then letters,
// digits, _ . -; at most 64), which no message can be made to say more
// with.
func ValidToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Gate is a configured gate. It is immutable once built, so one Gate may
// decide any number of scripts at once.
type Gate struct {
	commitTool string
	rules      *Rules
}

// config is what a Gate is built from. A decision has no side effect to
// configure: it reads no file, runs nothing and looks up no user, so
// nothing here is a hook into the machine; what a caller must read (a
// rules file) it reads itself and hands over as data.
type config struct {
	// commitTool is the tool the refusal sends the agent to.
	commitTool string
	// rules are denials beyond git's policy. If nil, only git writes are
	// refused.
	rules *Rules
}

// Option configures a Gate.
type Option func(*config)

// WithCommitTool sets the name of the commit tool the refusal message
// names (default git_commit), so the message matches the agent's tools.
func WithCommitTool(name string) Option { return func(c *config) { c.commitTool = name } }

// WithRules adds the denials of a rules file (ParseRules) to the git
// policy; nil adds none.
func WithRules(r *Rules) Option { return func(c *config) { c.rules = r } }

// New builds a Gate.
func New(opts ...Option) (*Gate, error) {
	c := config{commitTool: DefaultCommitTool}
	for _, o := range opts {
		o(&c)
	}
	name := strings.TrimSpace(c.commitTool)
	if name == "" || strings.ContainsAny(name, "\n\r`") {
		return nil, errors.New("vmgate: commit tool name must be one non-empty line")
	}
	return &Gate{commitTool: name, rules: c.rules}, nil
}

var defaultGate = &Gate{commitTool: DefaultCommitTool}

// Check decides a script with the default gate (git_commit, no rules).
func Check(script string) Verdict { return defaultGate.Check(script) }

// Parsers are reused: a parser is not safe for concurrent use, and a fresh
// one per decision costs allocations the one-line budget cannot spare. A
// parser keeps the last tree it made until its next parse, so only one
// that parsed a small text goes back to the pool: a large tree must not
// outlive its decision's reservation (budget.go).
var parsers = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash))
}}

// pooledText is the largest text whose parser goes back to the pool.
const pooledText = 16 << 10

func parse(src string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	if len(src) <= pooledText {
		parsers.Put(p)
	}
	if err != nil {
		// Parse returns a partial tree on error: it must not be read.
		return nil, err
	}
	return f, nil
}

// Check decides one script. It never runs or expands anything for real.
func (g *Gate) Check(script string) Verdict {
	// bash drops NUL bytes from its input (g<NUL>it is git); the gate
	// does the same, and keeps NUL for its own marks.
	if strings.IndexByte(script, 0) >= 0 {
		script = strings.ReplaceAll(script, "\x00", "")
	}
	f0, sc := tooBig(script)
	if f0 != nil {
		return g.verdict(f0)
	}
	reserved := cost(len(script), sc.nodes)
	reserve(reserved)
	defer release(reserved)
	f, err := parse(script)
	if err != nil {
		return g.verdict(&finding{reason: ReasonParseError, line: errLine(err), col: errCol(err), why: err.Error()})
	}
	w := newWalker(g, script, sc.nodes)
	w.stmts(f.Stmts, nil)
	w.atExit()
	return g.verdict(w.result())
}

// tooBig refuses, before the parse, a text past MaxScript, MaxNesting or
// MaxNodes (limits.go says why), and returns the scan of one that passes.
func tooBig(script string) (*finding, scan) {
	if len(script) > MaxScript {
		return &finding{reason: ReasonUndecidable, line: 1, col: 1, text: firstLineOf(script),
			why: fmt.Sprintf("the script is %d bytes, more than the %d the gate reads", len(script), MaxScript)}, scan{}
	}
	s := measure(script)
	if s.tooDeep() || s.tooMany() {
		at := min(s.at, len(script))
		line := 1 + strings.Count(script[:at], "\n")
		col := at - strings.LastIndexByte(script[:at], '\n')
		why := fmt.Sprintf("it nests more than %d levels deep", MaxNesting)
		if !s.tooDeep() {
			why = fmt.Sprintf("it holds more than %d words and operators", MaxNodes)
		}
		return &finding{reason: ReasonUndecidable, line: line, col: col, text: firstLineOf(script[at-col+1:]), why: why}, s
	}
	return nil, s
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func errLine(err error) int {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		return int(pe.Pos.Line())
	}
	var le syntax.LangError
	if errors.As(err, &le) {
		return int(le.Pos.Line())
	}
	return 0
}

func errCol(err error) int {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		return int(pe.Pos.Col())
	}
	var le syntax.LangError
	if errors.As(err, &le) {
		return int(le.Pos.Col())
	}
	return 0
}
