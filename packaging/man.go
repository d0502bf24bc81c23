package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// A man page is written from what the command itself prints on -h, and
// from nothing else, so that it cannot drift from the usage: the
// synopsis is the usage line, the description the rest of the text, and
// each subcommand the commands' list names (checked by running
// `COMMAND SUB -h`) gets a section of its own from its own -h. The parse
// assumes only what any usage text of ours has: a first line that starts
// with "usage:", and flags either as Go's flag package prints them or as
// lines of their own; whatever it does not recognise is kept as it is,
// preformatted. Not promised: pretty output for every layout a usage may
// take; a page that says what -h says is.

// maxHelp bounds what is read of a command's -h.
const maxHelp = 1 << 20

// helpOf runs bin with args and -h, in an environment that names no spool
// that exists, and returns what it printed (stdout and stderr: Go's flag
// package prints a subcommand's usage on stderr).
func helpOf(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tmp, err := os.MkdirTemp("", "vmspool-man-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, bin, append(args, "-h")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + tmp,
		"SPOOL_DIR=" + filepath.Join(tmp, "no-spool")}
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return "", fmt.Errorf("%s %s -h: %w", bin, strings.Join(args, " "), err)
	}
	if out.full {
		return "", fmt.Errorf("%s %s -h: more than %d bytes of usage", bin, strings.Join(args, " "), maxHelp)
	}
	return out.String(), nil
}

type limitedBuffer struct {
	bytes.Buffer
	full bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxHelp - b.Len(); len(p) > room {
		b.full = true
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return len(p), nil
}

// usage is a command's -h, split: the synopsis lines, as printed but for
// the "usage:" and the indentation they share, and the lines after them.
type usage struct {
	synopsis []string
	body     []string
}

// parseUsage splits a -h text. name is the command as it is called
// ("spool", "spool submit"). The synopsis runs from "usage:" to the first
// blank line or the first flag ("  -chat C").
func parseUsage(name, text string) (usage, error) {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(text, "\r", ""), "\n"), "\n")
	first, ok := cutPrefixFold(lines[0], "usage:")
	if !ok {
		return usage{}, fmt.Errorf("%s -h: the first line is not \"usage: ...\": %q", name, lines[0])
	}
	var u usage
	offset := -1 // the column the synopsis starts at
	if s := strings.TrimSpace(first); s != "" {
		u.synopsis = append(u.synopsis, s)
		offset = len(lines[0]) - len(strings.TrimLeft(first, " "))
	}
	i := 1
	for ; i < len(lines); i++ {
		l := expandTabs(strings.TrimRight(lines[i], " "))
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "-") {
			break
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if offset < 0 {
			offset = indent
		}
		u.synopsis = append(u.synopsis, l[min(indent, offset):])
	}
	if len(u.synopsis) == 0 {
		return usage{}, fmt.Errorf("%s -h: no synopsis after \"usage:\"", name)
	}
	for ; i < len(lines) && strings.TrimSpace(lines[i]) == ""; i++ {
	}
	u.body = lines[i:]
	return u, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

var subcommandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// subcommandCandidates are the first words of the lines of a -h that are
// indented by two to four spaces, as a list of commands is (the command's
// own name dropped when a line repeats it). Each is only a candidate
// until `COMMAND WORD -h` answers with a usage of its own.
func subcommandCandidates(name string, u usage) []string {
	var words []string
	seen := map[string]bool{}
	for _, l := range append(append([]string{}, u.synopsis...), u.body...) {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if strings.HasPrefix(l[indent:], "\t") {
			continue // a flag's description, as Go's flag package indents it
		}
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == name {
			f = f[1:]
		} else if indent < 2 || indent > 4 {
			continue
		}
		if len(f) == 0 || !subcommandWord.MatchString(f[0]) || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		words = append(words, f[0])
	}
	return words
}

// command is one man page's matter: the command's usage and those of its
// subcommands, in the order its own -h lists them.
type command struct {
	name string
	top  usage
	subs []subcommand
}

type subcommand struct {
	name string // "submit"
	u    usage
}

// readCommand runs bin -h and each subcommand's -h.
func readCommand(bin string) (command, error) {
	name := filepath.Base(bin)
	text, err := helpOf(bin)
	if err != nil {
		return command{}, err
	}
	top, err := parseUsage(name, text)
	if err != nil {
		return command{}, err
	}
	c := command{name: name, top: top}
	for _, w := range subcommandCandidates(name, top) {
		text, err := helpOf(bin, w)
		if err != nil {
			return command{}, err
		}
		u, err := parseUsage(name+" "+w, text)
		if err != nil || !strings.HasPrefix(u.synopsis[0], name+" "+w) {
			continue // not a subcommand: its -h did not answer with its usage
		}
		c.subs = append(c.subs, subcommand{name: w, u: u})
	}
	return c, nil
}

// page is what the roff needs besides the command.
type page struct {
	version string    // the package's version, in the page's footer
	date    time.Time // the build's date (SOURCE_DATE_EPOCH), not today's
	seeAlso []string  // the other commands, as "spoold"
	docs    string    // where the package puts docs/operations.md
}

// whatis is the page's one line in NAME: the first sentence of the
// command's description, up to its first colon or semicolon, without a
// trailing reference in parentheses.
func whatis(c command) string {
	var prose []string
	for _, l := range c.top.body {
		if strings.TrimSpace(l) == "" {
			if len(prose) > 0 {
				break
			}
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			if len(prose) > 0 {
				break
			}
			continue
		}
		prose = append(prose, strings.TrimSpace(l))
	}
	s := strings.Join(prose, " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexAny(s, ":;"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	if i := strings.LastIndex(s, " ("); i >= 0 && strings.HasSuffix(s, ")") {
		s = s[:i]
	}
	if s == "" {
		return "a command of vmspool, the job spool"
	}
	if len(s) > 1 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z' {
		s = strings.ToLower(s[:1]) + s[1:]
	}
	return s
}

// roff writes the page in man(7).
func roff(c command, p page) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, ".\\\" Generated from the output of `%s -h` and of each subcommand's -h\n", c.name)
	fmt.Fprintf(&b, ".\\\" by the vmspool packaging at build time; edit the usage text, not this.\n")
	fmt.Fprintf(&b, ".TH %s 1 %s \"vmspool %s\" \"vmspool\"\n", strings.ToUpper(c.name),
		p.date.UTC().Format("2006-01-02"), esc(p.version))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", esc(c.name), esc(whatis(c)))
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, s := range c.top.synopsis {
		b.WriteString(bold(s, c.name))
	}
	b.WriteString(".fi\n")
	if len(c.top.body) > 0 {
		b.WriteString(".SH DESCRIPTION\n")
		writeBody(&b, c.top.body)
	}
	if len(c.subs) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, s := range c.subs {
			fmt.Fprintf(&b, ".SS %s\n.nf\n", esc(c.name+" "+s.name))
			for _, l := range s.u.synopsis {
				b.WriteString(bold(l, c.name+" "+s.name))
			}
			b.WriteString(".fi\n")
			writeBody(&b, s.u.body)
		}
	}
	if len(p.seeAlso) > 0 || p.docs != "" {
		b.WriteString(".SH SEE ALSO\n")
		for i, s := range p.seeAlso {
			sep := ","
			if i == len(p.seeAlso)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, ".BR %s (1)%s\n", esc(s), sep)
		}
		if p.docs != "" {
			fmt.Fprintf(&b, ".PP\n%s\n", esc(p.docs))
		}
	}
	return b.Bytes()
}

// bold writes a synopsis line with the command's name in bold.
func bold(line, name string) string {
	if rest, ok := strings.CutPrefix(line, name); ok {
		return `\fB` + esc(name) + `\fR` + esc(rest) + "\n"
	}
	return line0(esc(line)) + "\n"
}

var goFlag = regexp.MustCompile(`^  (-[A-Za-z0-9][^ ]*)(.*)$`)

// writeBody renders the lines after a synopsis: prose as filled
// paragraphs, Go's flag listings as tagged paragraphs, and any other
// indented line as it is, preformatted.
func writeBody(b *bytes.Buffer, lines []string) {
	const (
		none = iota
		prose
		pre
	)
	state := none
	set := func(s int) {
		if state == s {
			return
		}
		if state == pre {
			b.WriteString(".fi\n.RE\n")
		}
		switch s {
		case prose:
			b.WriteString(".PP\n")
		case pre:
			b.WriteString(".RS 2\n.nf\n")
		}
		state = s
	}
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t")
		switch {
		case l == "":
			set(none)
		case goFlag.MatchString(l) && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    \t"):
			set(none)
			m := goFlag.FindStringSubmatch(l)
			fmt.Fprintf(b, ".TP\n\\fB%s\\fR%s\n", esc(m[1]), esc(m[2]))
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    \t") {
				i++
				b.WriteString(line0(esc(strings.TrimSpace(lines[i]))) + "\n")
			}
		case l[0] == ' ' || l[0] == '\t':
			set(pre)
			b.WriteString(line0(esc(strings.TrimPrefix(expandTabs(l), "  "))) + "\n")
		default:
			set(prose)
			b.WriteString(line0(esc(l)) + "\n")
		}
	}
	set(none)
}

func expandTabs(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\t' {
			b.WriteString(strings.Repeat(" ", 8-b.Len()%8))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// esc makes text literal in roff: a backslash is \e, a hyphen the
// minus sign of options (\-).
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// line0 keeps a line that starts with a control character (. or ') from
// being read as a request.
func line0(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}
