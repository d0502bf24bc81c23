// Command vmgate filters scripts before they reach the machine: it refuses
// git writes (and whatever a rules file denies) and lets everything else
// through. `check` decides, `run` decides and then runs, `serve` is the
// gate as a daemon over $SPOOL_DIR/gate/. The decisions are package
// vmgate's; this file only reads flags and streams.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/vmspool/vmspool/gated"
	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/vmgate"
)

const name = "vmgate"

const usage = `usage: vmgate COMMAND [flags]

Refuses git writes in scripts before they reach the machine (docs/gate.md).

  check [--json] [-c SCRIPT | FILE | -]   decide one script: exit 0 allowed, 1 refused
  run [--shell SH | --machine CMD] [-c SCRIPT | FILE | -]
                                          decide, then run it only if allowed:
                                          the script's exit, or 1 refused before anything ran
  serve [--machine CMD] [--poll D]        the gate as a daemon over $SPOOL_DIR/gate/

Flags every command takes:
  --spool DIR          the spool (default $SPOOL_DIR, $JOBS_DIR, /var/spool/vm for root,
                       else ${XDG_STATE_HOME:-~/.local/state}/vmspool)
  --commit-tool NAME   the commit tool the refusal names (default $VMSPOOL_COMMIT_TOOL
                       when it is a tool's name, else git_commit)
  --rules FILE         more denials, one 'deny COMMAND [SUB] [: MESSAGE]' a line
  --version            print the version

Without -c or FILE, the script is read from standard input when it is not
a terminal. Run 'vmgate COMMAND -h' for a command's flags.
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, cli.Version(name))
		return cli.ExitOK
	}
	var code int
	var err error
	switch args[0] {
	case "check":
		code, err = check(args[1:], stdin, stdout, stderr)
	case "run":
		code, err = runCmd(args[1:], stdin, stdout, stderr)
	case "serve":
		code, err = serve(args[1:], stdout, stderr)
	default:
		err = cli.Usagef("unknown command %q (want check, run or serve; see 'vmgate -h')", args[0])
	}
	if err != nil {
		return cli.Report(stderr, name, err)
	}
	return code
}

// common are the flags every command takes.
type common struct {
	fs         *flag.FlagSet
	cmd        string
	synopsis   string
	stdout     io.Writer
	spool      string
	commitTool string
	rules      string
	version    bool
}

func newFlags(cmd, synopsis string, stdout io.Writer) *common {
	c := &common{fs: flag.NewFlagSet(cmd, flag.ContinueOnError), cmd: cmd, synopsis: synopsis, stdout: stdout}
	// The flag package would print errors with the whole usage; errors
	// are one line here, and -h prints the usage on stdout.
	c.fs.SetOutput(io.Discard)
	c.fs.StringVar(&c.spool, "spool", "", "the spool directory")
	tool := vmgate.DefaultCommitTool
	if env := os.Getenv(vmgate.CommitToolEnv); vmgate.ValidToolName(env) {
		// Inside a job run for a client whose commit tool has another
		// name: every refusal the agent reads names that one.
		tool = env
	}
	c.fs.StringVar(&c.commitTool, "commit-tool", tool, "the commit tool the refusal message names")
	c.fs.StringVar(&c.rules, "rules", "", "a rules file of more denials")
	c.fs.BoolVar(&c.version, "version", false, "print the version")
	c.fs.Usage = func() {}
	return c
}

// parse parses flags and operands in any order (vmgate check FILE --json).
func (c *common) parse(args []string) ([]string, error) {
	var operands []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(c.stdout, "usage: vmgate %s %s\n\nflags:\n", c.cmd, c.synopsis)
				c.fs.SetOutput(c.stdout)
				c.fs.PrintDefaults()
				return nil, err
			}
			return nil, cli.Usagef("%v (see 'vmgate %s -h')", err, c.cmd)
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return operands, nil
		}
		operands = append(operands, args[0])
		args = args[1:]
		if operands[len(operands)-1] == "--" {
			operands = append(operands[:len(operands)-1], args...)
			return operands, nil
		}
	}
}

func (c *common) gate() (*vmgate.Gate, error) {
	opts := []vmgate.Option{vmgate.WithCommitTool(c.commitTool)}
	if c.rules != "" {
		r, err := vmgate.LoadRules(c.rules)
		if err != nil {
			return nil, cli.Usagef("%v", err)
		}
		opts = append(opts, vmgate.WithRules(r))
	}
	g, err := vmgate.New(opts...)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return g, nil
}

// script reads the script from -c, FILE, - or a non-terminal stdin.
func script(inline string, inlineSet bool, operands []string, stdin io.Reader) (string, error) {
	switch {
	case len(operands) > 1:
		return "", cli.Usagef("one script at a time, got %d operands", len(operands))
	case inlineSet && len(operands) == 1:
		return "", cli.Usagef("give -c SCRIPT or FILE, not both")
	case inlineSet:
		return inline, nil
	case len(operands) == 1 && operands[0] != "-":
		data, err := os.ReadFile(operands[0])
		if err != nil {
			return "", cli.Usagef("cannot read the script: %v", err)
		}
		return string(data), nil
	}
	if len(operands) == 0 {
		if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return "", cli.Usagef("no script: give -c SCRIPT, FILE, or - for standard input")
		}
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return "", cli.Usagef("cannot read the script from standard input: %v", err)
	}
	return string(data), nil
}

func isSet(fs *flag.FlagSet, n string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == n })
	return set
}

// gateScript parses args, answers -h and --version, and returns the gate
// and the script (-c inline, FILE or stdin) with the operands; done means
// the command has answered already and exits 0.
func (c *common) gateScript(args []string, inline *string, stdin io.Reader) (g *vmgate.Gate, src string, operands []string, done bool, err error) {
	operands, err = c.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, "", nil, true, nil
	}
	if err != nil {
		return nil, "", nil, false, err
	}
	if c.version {
		fmt.Fprintln(c.stdout, cli.Version(name))
		return nil, "", nil, true, nil
	}
	if g, err = c.gate(); err != nil {
		return nil, "", nil, false, err
	}
	if src, err = script(*inline, isSet(c.fs, "c"), operands, stdin); err != nil {
		return nil, "", nil, false, err
	}
	return g, src, operands, false, nil
}

func check(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c := newFlags("check", "[--json] [-c SCRIPT | FILE | -]", stdout)
	asJSON := c.fs.Bool("json", false, `print {"allowed","git","reason","message",...} as JSON`)
	inline := c.fs.String("c", "", "the script itself")
	g, src, _, done, err := c.gateScript(args, inline, stdin)
	if err != nil {
		return 0, err
	}
	if done {
		return cli.ExitOK, nil
	}
	v := g.Check(src)
	if *asJSON {
		data, _ := json.Marshal(v)
		fmt.Fprintf(stdout, "%s\n", data)
	} else if !v.Allowed {
		fmt.Fprintln(stdout, v.Message)
	}
	if !v.Allowed {
		return cli.ExitFail, nil
	}
	return cli.ExitOK, nil
}

func runCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c := newFlags("run", "[--shell SH | --machine CMD] [-c SCRIPT | FILE | -]", stdout)
	inline := c.fs.String("c", "", "the script itself")
	shell := c.fs.String("shell", "bash", "the machine's shell: runs SH -c SCRIPT")
	machine := c.fs.String("machine", "", "a command that receives the script on stdin (e.g. 'ssh vm bash -s'); wins over --shell")
	g, src, operands, done, err := c.gateScript(args, inline, stdin)
	if err != nil {
		return 0, err
	}
	if done {
		return cli.ExitOK, nil
	}
	// Decide first: a refused script never starts the machine's shell.
	if v := g.Check(src); !v.Allowed {
		fmt.Fprintln(stderr, v.Message)
		return cli.ExitFail, nil
	}
	sig := cli.CatchSignals()
	defer sig.Stop()
	ctx := sig.Context()
	m := vmgate.Machine{Shell: *shell, Command: *machine}
	if len(operands) == 1 && operands[0] == "-" || len(operands) == 0 && !isSet(c.fs, "c") {
		stdin = nil // the script came from stdin: nothing is left to give it
	}
	code, err := m.Run(ctx, src, stdin, stdout, stderr)
	if err != nil {
		return code, fmt.Errorf("cannot start the machine's shell: %v", err)
	}
	return code, nil
}

func serve(args []string, stdout, stderr io.Writer) (int, error) {
	// Signals are caught from the start; the first lets running scripts
	// finish for --grace, the second stops them at once.
	sig := cli.CatchSignals()
	defer sig.Stop()
	ctx := sig.Context()
	c := newFlags("serve", "[--machine CMD] [--poll D] [--parallel N] [--timeout D]", stdout)
	machine := c.fs.String("machine", "", "run allowed requests with this command, which receives the script on stdin")
	poll := cli.Duration(c.fs, "poll", 0, "poll gate/in/ at this interval instead of inotify (NFS, FUSE)")
	rescan := cli.Duration(c.fs, "rescan", time.Minute, "safety-net rescan interval with inotify")
	parallel := c.fs.Int("parallel", 2, "allowed scripts run at once")
	timeout := cli.Duration(c.fs, "timeout", 0, "stop a run after this long (0: never)")
	grace := cli.Duration(c.fs, "grace", 10*time.Second, "on SIGTERM, how long running scripts may finish")
	level := c.fs.String("log-level", "info", "debug, info, warn or error")
	metrics := c.fs.String("metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:8378); empty: off")
	operands, err := c.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK, nil
	}
	if err != nil {
		return 0, err
	}
	if c.version {
		fmt.Fprintln(stdout, cli.Version(name))
		return cli.ExitOK, nil
	}
	if len(operands) > 0 {
		return 0, cli.Usagef("serve takes no operands, got %q", operands[0])
	}
	if *parallel < 1 {
		return 0, cli.Usagef("--parallel must be at least 1")
	}
	g, err := c.gate()
	if err != nil {
		return 0, err
	}
	log, err := ops.Logger(stderr, *level)
	if err != nil {
		return 0, cli.Usagef("%v", err)
	}
	// The spool is made if missing (the gate may be the only part of it
	// on this machine); every file of it is then reached through package
	// spool.
	sp, err := spool.Create(spool.Locate(c.spool, os.Getenv, os.Getuid()))
	if err != nil {
		return cli.ExitFail, err
	}
	defer sp.Close()
	dir := sp.Path(spool.GateDir)
	cfg := gated.ServerConfig{
		Spool: sp, Gate: g, Log: log, Poll: *poll, Rescan: *rescan,
		Parallel: *parallel, Timeout: *timeout, Grace: *grace, Now: sig.Now(),
	}
	if *machine != "" {
		cfg.Machine = &vmgate.Machine{Command: *machine}
	}
	svc := ops.NewService(name, true, log)
	if *metrics != "" {
		cfg.Metrics = ops.NewGateMetrics(svc.Registry)
		stop, err := svc.ServeMetrics(*metrics)
		if err != nil {
			return 0, err
		}
		defer stop()
	}
	cfg.Ready = func() {
		svc.Ready()
		log.WithFields(map[string]any{"dir": dir, "machine": *machine}).Info("vmgate serving")
	}
	sig.OnSignal(func(os.Signal) { svc.Stopping() }, nil)
	// The watchdog is pinged only while the loop goes round and the gate
	// directory answers: a stuck daemon is restarted, not kept alive.
	pulse := &ops.Pulse{}
	cfg.Beat = pulse.Beat
	svc.Watchdog(ctx, pulse.Within(30*time.Second), ops.DirHealth(dir))
	if err := gated.Serve(ctx, cfg); err != nil {
		return cli.ExitFail, errors.New(strings.TrimPrefix(err.Error(), "vmgate: "))
	}
	log.Info("vmgate stopped")
	return cli.ExitOK, nil
}
