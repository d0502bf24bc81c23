package vmgate

import (
	"fmt"
	"strings"
)

// Reason says why a script was refused. Callers tell a certain git write
// from a script the gate could not read, because the agent fixes them
// differently: the first goes through the commit tool, the second is
// written out literally.
type Reason string

const (
	// ReasonGitWrite: the script would run a git command that changes
	// refs, the index, objects, config or remotes, or publishes.
	ReasonGitWrite Reason = "git-write"
	// ReasonUndecidable: the gate cannot know statically whether a command
	// is a git write (a command word built at run time with write-like
	// arguments, eval of a variable, an unknown git subcommand that may be
	// an alias). docs/gate.md has the rule.
	ReasonUndecidable Reason = "undecidable"
	// ReasonParseError: the script does not parse. bash runs some inputs
	// this parser rejects, so a script the gate cannot read is refused.
	ReasonParseError Reason = "parse-error"
	// ReasonPolicy: a rule of the rules file denies the command.
	ReasonPolicy Reason = "policy"
)

// Verdict is the gate's decision on one script. Its JSON form is what
// `vmgate check --json` prints and what `vmgate serve` writes.
type Verdict struct {
	Allowed bool    `json:"allowed"`
	Git     *string `json:"git"`    // the first git write's subcommand, e.g. "add"; null if none
	Reason  *string `json:"reason"` // null when allowed
	Message string  `json:"message"`
	// Line and Col locate the refused command in the script (1-based);
	// for code inside a string (bash -c, eval) they locate the outer
	// command that runs the string.
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
	// Command is the refused command's text as written.
	Command string `json:"command,omitempty"`
}

// finding is one refusal found while walking the script.
type finding struct {
	reason Reason
	git    string // subcommand for git writes
	line   int
	col    int
	text   string // the command's source text
	why    string // a short clause: what makes it a write or undecidable
	rule   *rule  // for policy findings
	fatal  bool   // the walk stops here: it stands even inside a function body
}

func strp(s string) *string { return &s }

func (g *Gate) verdict(f *finding) Verdict {
	if f == nil {
		return Verdict{Allowed: true}
	}
	v := Verdict{
		Reason:  strp(string(f.reason)),
		Line:    f.line,
		Col:     f.col,
		Command: f.text,
		Message: g.message(f),
	}
	if f.reason == ReasonGitWrite && f.git != "" {
		v.Git = strp(f.git)
	}
	return v
}

// maxQuote bounds the command text quoted in a message, so that the
// message stays readable at a glance whatever the script holds.
const maxQuote = 120

func quoteCommand(s string) string {
	if len(s) > 4*maxQuote {
		s = s[:4*maxQuote] // what is quoted is clipped below anyway
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxQuote {
		s = s[:maxQuote-3] + "..."
	}
	return "`" + s + "`"
}

// message is the refusal text the agent reads as tool output: what was
// refused and where, where commits go instead, and that the usual
// symptoms are not to be fought.
func (g *Gate) message(f *finding) string {
	var b strings.Builder
	where := fmt.Sprintf("line %d, col %d", f.line, f.col)
	tool := g.commitTool
	switch f.reason {
	case ReasonParseError:
		fmt.Fprintf(&b, "vmgate refused the script: it does not parse (%s), so the gate cannot read it. Nothing ran. Fix the syntax and send it again.", f.why)
		return b.String()
	case ReasonPolicy:
		fmt.Fprintf(&b, "vmgate refused %s at %s: %s. Nothing ran.", quoteCommand(f.text), where, f.rule.message())
		return b.String()
	case ReasonUndecidable:
		fmt.Fprintf(&b, "vmgate refused %s at %s: the gate cannot tell whether it writes to git (%s). Nothing ran. Write the command out literally.\n", quoteCommand(f.text), where, f.why)
	default:
		fmt.Fprintf(&b, "vmgate refused %s at %s: %s. Nothing ran.\n", quoteCommand(f.text), where, f.why)
	}
	fmt.Fprintf(&b, "Git writes (add, commit, push, ...) do not run in the VM: commits go through the %s tool, which commits on the host with the right author, hardened hooks and filters, and scratch left out of what is published.\n", tool)
	b.WriteString("Exit 128, \"dubious ownership\", safe.directory and HOME are symptoms of this same rule: do not fight them.\n")
	fmt.Fprintf(&b, "Instead: leave the changes in the work tree and call %s with a message. Read-only git (status, diff, log, show) is fine.", tool)
	return b.String()
}
