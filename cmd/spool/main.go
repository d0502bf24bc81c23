// Command spool is the shell's view of the job spool: it submits jobs,
// lists and shows them, cancels and requeues them, answers a run's
// question, speaks for a job from inside it (say, ask), and collects and
// checks the tree (gc, fsck). It runs no job itself; spoold does.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

const usage = `usage: spool [--spool DIR] COMMAND [flags] [args]

The shell's view of the job spool (docs/contract.md). Commands:

  submit --chat C [--timeout D] [--attempts N] [--cwd DIR] [--env K=V]... [--id ID] -- ARGV...
  submit --chat C --script FILE|-      queue a script job
  submit --spec FILE|-                 queue a whole spec document
  ls [--json] [--state S]              one line a job: id, state, chat, age, attempt
  show JOB [--json]                    spec, state, lease or result, events, the chat's progress
  cancel JOB [--wait] [--timeout D]    request a cancel (and wait for the end)
  requeue JOB                          queue a failed or cancelled job again
  answer --chat C [--question Q] TEXT  answer the run's open question
  say TEXT                             inside a job: append a status event
  ask [--options a,b] [--timeout D] TEXT   inside a job: ask the person, print the answer
  gc [--older D] [--dry-run]           remove ended jobs' files older than D (default 7d)
  fsck [--fix] [--json] [--lease D]    report (and repair) what breaks docs/contract.md

The spool is --spool DIR, else $SPOOL_DIR, else $JOBS_DIR, else
/var/spool/vm for root and ${XDG_STATE_HOME:-~/.local/state}/vmspool.
Run 'spool COMMAND -h' for a command's flags. Exit codes: 0 ok, 1 failed
or nothing to do (see each command), 2 usage or bad input, 124 timed out.
`

// app is one invocation: its streams and environment, so that tests and
// main share the same code.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	spoolFlag      string
}

func fail(code int, format string, args ...any) error { return cli.Failf(code, format, args...) }

// usageErr is a usage error of a command: exit 2.
func usageErr(cmd, format string, args ...any) error {
	return cli.Usagef("%s (see 'spool %s -h')", fmt.Sprintf(format, args...), cmd)
}

// codeOf maps an error of package spool to an exit code: bad input is 2,
// a job that does not exist 1, anything else 1.
func codeOf(err error) int {
	var e *cli.Error
	switch {
	case errors.As(err, &e):
		return cli.Code(err)
	case errors.Is(err, spool.ErrInvalidID), errors.Is(err, spool.ErrCorrupt), errors.Is(err, spool.ErrNoSpool),
		errors.Is(err, spool.ErrNotRegular), errors.Is(err, spool.ErrTooLarge):
		return cli.ExitUsage
	}
	return cli.ExitFail
}

func main() {
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(a.run(os.Args[1:]))
}

var commands = map[string]func(*app, []string) error{
	"submit":  (*app).submit,
	"ls":      (*app).ls,
	"show":    (*app).show,
	"cancel":  (*app).cancel,
	"requeue": (*app).requeue,
	"answer":  (*app).answer,
	"say":     (*app).say,
	"ask":     (*app).ask,
	"gc":      (*app).gc,
	"fsck":    (*app).fsck,
}

func (a *app) run(args []string) int {
	// Flags before the command: --spool DIR, -h, --version.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		arg := args[0]
		switch {
		case arg == "-h" || arg == "-help" || arg == "--help":
			fmt.Fprint(a.stdout, usage)
			return cli.ExitOK
		case arg == "--version" || arg == "-version":
			fmt.Fprintln(a.stdout, cli.Version("spool"))
			return cli.ExitOK
		case arg == "--spool" || arg == "-spool":
			if len(args) < 2 {
				fmt.Fprintln(a.stderr, "spool: --spool needs a directory")
				return cli.ExitUsage
			}
			a.spoolFlag, args = args[1], args[2:]
			continue
		case strings.HasPrefix(arg, "--spool=") || strings.HasPrefix(arg, "-spool="):
			a.spoolFlag = arg[strings.IndexByte(arg, '=')+1:]
			args = args[1:]
			continue
		}
		fmt.Fprintf(a.stderr, "spool: unknown flag %s before the command (see 'spool -h')\n", arg)
		return cli.ExitUsage
	}
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return cli.ExitUsage
	}
	if args[0] == "help" {
		fmt.Fprint(a.stdout, usage)
		return cli.ExitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(a.stderr, "spool: unknown command %q (see 'spool -h')\n", args[0])
		return cli.ExitUsage
	}
	if err := cmd(a, args[1:]); cli.Report(a.stderr, "spool "+args[0], err) != cli.ExitOK {
		return codeOf(err)
	}
	return cli.ExitOK
}

// command is a command's flag set, with the flags every command has.
type command struct {
	*flag.FlagSet
	a       *app
	name    string
	usage   string
	version bool
}

func (a *app) newCommand(name, usage string) *command {
	c := &command{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), a: a, name: name, usage: usage}
	c.SetOutput(io.Discard)
	c.StringVar(&a.spoolFlag, "spool", a.spoolFlag, "the spool `DIR`")
	c.BoolVar(&c.version, "version", false, "print the version")
	return c
}

// parse parses flags wherever they stand among the arguments (spool show
// JOB --json works), until a "--", after which everything is an argument.
func (c *command) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(c.a.stdout, c.help())
				return nil, cli.ErrHelp
			}
			return nil, usageErr(c.name, "%v", err)
		}
		rest := c.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if c.version {
		fmt.Fprintln(c.a.stdout, cli.Version("spool"))
		return nil, cli.ErrHelp
	}
	return pos, nil
}

// openJob parses args, which must name one JOB, checks its id and opens
// the spool; the caller closes it.
func (c *command) openJob(args []string) (*spool.Spool, string, error) {
	pos, err := c.parse(args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) != 1 {
		return nil, "", usageErr(c.name, "want one JOB")
	}
	job := pos[0]
	if err := spool.CheckJobID(job); err != nil {
		return nil, "", err
	}
	s, err := c.a.open()
	if err != nil {
		return nil, "", err
	}
	return s, job, nil
}

func (c *command) help() string {
	var b strings.Builder
	b.WriteString(c.usage)
	b.WriteString("\nFlags:\n")
	c.SetOutput(&b)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
	return b.String()
}

// dir resolves the spool directory the way docs/contract.md says.
func (a *app) dir() string {
	return spool.Locate(a.spoolFlag, a.getenv, os.Getuid())
}

// open opens the existing spool; a missing one is bad input (exit 2),
// never created here.
func (a *app) open() (*spool.Spool, error) {
	s, err := spool.Open(a.dir())
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return s, nil
}

// parseDuration is the one duration grammar of the commands (cli).
func parseDuration(s string) (time.Duration, error) { return cli.ParseDuration(s) }

// durationFlag is a flag.Value for parseDuration.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// age prints a duration the way ls does: 12s, 5m, 3h, 4d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// line makes text fit one line of a table.
func line(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
