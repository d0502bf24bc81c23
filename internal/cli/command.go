package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// Command is one command of a program, in the manner of Caddy's
// cmd/commands.go: declared once, as data, and run by the program's Main,
// which alone parses its flags, answers -h and --version, and turns what
// Run returns into an exit code. A command never prints its own usage or
// exits.
type Command struct {
	// Name is the word that calls it ("submit"). Empty for a program that
	// is one command (spoold).
	Name string
	// Usage is the synopsis after "NAME COMMAND ": its operands and main
	// flags ("JOB [--wait]"). A line a form, each printed after the
	// command's name; a line that starts with a space goes on with the
	// form above it.
	Usage string
	// Short says what the command does in one line, without a colon:
	// the first line of its -h after the synopsis, its line in the
	// program's list of commands, and (for the program itself) the man
	// page's summary, which packaging/man.go reads from -h.
	Short string
	// Long is the rest of the -h text: what it writes, its exit codes.
	Long string
	// Flags declares the command's flags on a fresh set at each call (the
	// program's own flags are declared on it already). Nil: none.
	Flags func(fs *flag.FlagSet)
	// Run does the command. Its error is said on stderr in one line,
	// "NAME COMMAND: message", and becomes the exit code (Code).
	Run func(c *Call) error
}

// Program is one binary: its commands, registered once, and the flags
// every one of them takes.
type Program struct {
	// Name is the binary's name ("spool").
	Name string
	// Usage is the synopsis after the name for a program of several
	// commands ("[--spool DIR] COMMAND [flags] [args]").
	Usage string
	// Short and Long are the program's own -h text, as a Command's are.
	Short, Long string
	// Common declares the flags every command takes (--spool DIR); they
	// may also stand before the command. --version and -h are Main's.
	Common func(fs *flag.FlagSet)

	commands []*Command
}

var commandName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Register adds c to the program. It panics on a name taken or
// malformed, on a command without Run or Short, and on a second command
// where one has no name: registration is the program's own code, checked
// by its first run.
func (p *Program) Register(c Command) {
	switch {
	case c.Run == nil || c.Short == "":
		panic(fmt.Sprintf("%s: command %q: no Run or no Short", p.Name, c.Name))
	case strings.ContainsAny(c.Short, "\n:;"):
		panic(fmt.Sprintf("%s: command %q: Short is not one line without a colon", p.Name, c.Name))
	case c.Name != "" && !commandName.MatchString(c.Name):
		panic(fmt.Sprintf("%s: command %q: not a command's name", p.Name, c.Name))
	case c.Name == "" && len(p.commands) > 0, c.Name != "" && p.single():
		panic(fmt.Sprintf("%s: a command without a name is the program's only one", p.Name))
	case p.lookup(c.Name) != nil:
		panic(fmt.Sprintf("%s: command %q registered twice", p.Name, c.Name))
	}
	p.commands = append(p.commands, &c)
}

// single says whether the program is one command with no name.
func (p *Program) single() bool { return len(p.commands) == 1 && p.commands[0].Name == "" }

func (p *Program) lookup(name string) *Command {
	for _, c := range p.commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// IO is what a call reads and writes besides the tree: its streams and its
// environment, so that tests run a program as main does.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Main runs the program on the process's arguments and streams, and exits
// with the code of its error.
func (p *Program) Main() {
	os.Exit(p.Run(os.Args[1:], IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
}

// Run runs the command that args name, with its flags and operands, and
// returns the exit code: the one place where a program's error becomes a
// code and a line on stderr (Report).
func (p *Program) Run(args []string, stdio IO) int {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	if p.single() {
		return p.call(p.commands[0], nil, args, stdio)
	}
	// Flags before the command: the program's own, -h and --version.
	top := p.flagSet(p.Name)
	version := top.Bool("version", false, "print the version")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdio.Stdout, p.help())
			return ExitOK
		}
		return Report(stdio.Stderr, p.Name, p.usagef(nil, "%v", err))
	}
	args = top.Args()
	switch {
	case *version:
		fmt.Fprintln(stdio.Stdout, Version(p.Name))
		return ExitOK
	case len(args) == 0:
		fmt.Fprint(stdio.Stderr, p.help())
		return ExitUsage
	case args[0] == "help":
		fmt.Fprint(stdio.Stdout, p.help())
		return ExitOK
	case args[0] == "version":
		fmt.Fprintln(stdio.Stdout, Version(p.Name))
		return ExitOK
	}
	c := p.lookup(args[0])
	if c == nil {
		return Report(stdio.Stderr, p.Name, p.usagef(nil, "unknown command %q", args[0]))
	}
	return p.call(c, top, args[1:], stdio)
}

// call parses c's flags (after those of top, the flags before the
// command) and runs it.
func (p *Program) call(c *Command, top *flag.FlagSet, args []string, stdio IO) int {
	name := p.title(c)
	fs := p.flagSetFor(c)
	if top != nil {
		var err error
		top.Visit(func(f *flag.Flag) {
			if f.Name != "version" && err == nil {
				err = fs.Set(f.Name, f.Value.String())
			}
		})
		if err != nil {
			return Report(stdio.Stderr, name, p.usagef(c, "%v", err))
		}
	}
	operands, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdio.Stdout, p.commandHelp(c, fs))
		return ExitOK
	}
	if err != nil {
		return Report(stdio.Stderr, name, p.usagef(c, "%v", err))
	}
	call := &Call{IO: stdio, Args: operands, prog: p, cmd: c, fs: fs}
	if call.Bool("version") {
		fmt.Fprintln(stdio.Stdout, Version(p.Name))
		return ExitOK
	}
	return Report(stdio.Stderr, name, c.Run(call))
}

// parse parses flags wherever they stand among the operands (spool show
// JOB --json), until a "--", after which everything is an operand.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return operands, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(operands, rest...), nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

func (p *Program) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package would print an error with the whole usage; errors
	// are one line here, and -h prints the usage on stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if p.Common != nil {
		p.Common(fs)
	}
	return fs
}

// title is how a command is called: "spool submit", or "spoold".
func (p *Program) title(c *Command) string {
	if c == nil || c.Name == "" {
		return p.Name
	}
	return p.Name + " " + c.Name
}

// hint is the one wording of where to read a command's usage, which ends
// every usage error of every program: "(see 'spool submit -h')".
func (p *Program) hint(c *Command) string { return "(see '" + p.title(c) + " -h')" }

func (p *Program) usagef(c *Command, format string, args ...any) error {
	return Usagef("%s %s", fmt.Sprintf(format, args...), p.hint(c))
}

// help is the program's -h: its synopsis, Short, its commands with
// theirs, and Long.
func (p *Program) help() string {
	if p.single() {
		c := p.commands[0]
		return p.commandHelp(c, p.flagSetFor(c))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s %s\n\n%s\n\nCommands:\n", p.Name, p.Usage, p.Short)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range p.commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Short)
	}
	tw.Flush()
	if p.Long != "" {
		b.WriteString("\n" + strings.TrimRight(p.Long, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\nRun '%s COMMAND -h' for a command's synopsis and flags.\n", p.Name)
	return b.String()
}

// flagSetFor is a fresh flag set of c: the program's flags, --version and
// c's own.
func (p *Program) flagSetFor(c *Command) *flag.FlagSet {
	fs := p.flagSet(p.title(c))
	fs.Bool("version", false, "print the version")
	if c.Flags != nil {
		c.Flags(fs)
	}
	return fs
}

// commandHelp is a command's -h: "usage: NAME COMMAND USAGE" (a line a
// form), Short, Long, and its flags as the flag package lists them.
func (p *Program) commandHelp(c *Command, fs *flag.FlagSet) string {
	var b strings.Builder
	title := p.title(c)
	for i, form := range strings.Split(strings.TrimRight(c.Usage, "\n"), "\n") {
		switch {
		case i == 0:
			b.WriteString("usage: " + title)
		case strings.TrimLeft(form, " \t") != form:
			// A line that starts with a space goes on with the form above.
			b.WriteString("       " + strings.Repeat(" ", len(title)))
		default:
			b.WriteString("       " + title)
		}
		if form = strings.TrimSpace(form); form != "" {
			b.WriteString(" " + form)
		}
		b.WriteString("\n")
	}
	short := c.Short
	if c.Name == "" && p.Short != "" {
		short = p.Short
	}
	fmt.Fprintf(&b, "\n%s\n", short)
	if c.Long != "" {
		b.WriteString("\n" + strings.TrimRight(c.Long, "\n") + "\n")
	}
	b.WriteString("\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// Call is one run of a command: its operands, its flags' values, its
// streams and environment.
type Call struct {
	IO
	// Args are the operands: what is not a flag, and all after "--".
	Args []string

	prog *Program
	cmd  *Command
	fs   *flag.FlagSet
}

// Name is how the command was called: "spool submit".
func (c *Call) Name() string { return c.prog.title(c.cmd) }

// Usagef is a usage error of the command, with the one hint: exit
// ExitUsage, "NAME COMMAND: message (see 'NAME COMMAND -h')".
func (c *Call) Usagef(format string, args ...any) error {
	return c.prog.usagef(c.cmd, format, args...)
}

// NoOperands is a usage error if the command was given any operand.
func (c *Call) NoOperands() error {
	if len(c.Args) > 0 {
		return c.Usagef("unexpected argument %q", c.Args[0])
	}
	return nil
}

// value is the value of the flag name, which the command declared: a
// name it did not is the command's own bug, and panics.
func (c *Call) value(name string) any {
	f := c.fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("%s: no flag --%s", c.Name(), name))
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		panic(fmt.Sprintf("%s: flag --%s has no getter", c.Name(), name))
	}
	return g.Get()
}

// String is the value of a string flag.
func (c *Call) String(name string) string { return c.value(name).(string) }

// Bool is the value of a bool flag.
func (c *Call) Bool(name string) bool { return c.value(name).(bool) }

// Int is the value of an int flag.
func (c *Call) Int(name string) int { return c.value(name).(int) }

// Int64 is the value of an int64 flag.
func (c *Call) Int64(name string) int64 { return c.value(name).(int64) }

// Float64 is the value of a float64 flag.
func (c *Call) Float64(name string) float64 { return c.value(name).(float64) }

// Duration is the value of a duration flag (DurationVar, Duration).
func (c *Call) Duration(name string) time.Duration { return c.value(name).(time.Duration) }

// Flag is the value of a flag of another type (a flag.Value of the
// command's own), for the command to assert.
func (c *Call) Flag(name string) flag.Value {
	f := c.fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("%s: no flag --%s", c.Name(), name))
	}
	return f.Value
}

// IsSet says whether the flag was given, before the command or after.
func (c *Call) IsSet(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
