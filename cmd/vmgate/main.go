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
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/vmgate"
	"github.com/vmspool/vmspool/vmgate/machine"
	"github.com/vmspool/vmspool/vmgate/server"
)

var prog = &cli.Program{
	Name:  "vmgate",
	Usage: "COMMAND [flags]",
	Short: "Refuses git writes in scripts before they reach the machine (docs/gate.md).",
	Long: `It refuses git writes (and whatever a rules file denies) and lets
everything else through. Without -c or FILE, the script is read from
standard input when it is not a terminal.`,
	Common: func(fs *flag.FlagSet) {
		fs.String("spool", "", "the spool `DIR` (default $SPOOL_DIR, $JOBS_DIR, then as spool -h says)")
		tool := vmgate.DefaultCommitTool
		if env := os.Getenv(vmgate.CommitToolEnv); vmgate.ValidToolName(env) {
			// Inside a job run for a client whose commit tool has another
			// name: every refusal the agent reads names that one.
			tool = env
		}
		fs.String("commit-tool", tool, "the commit tool `NAME` the refusal message names ($"+vmgate.CommitToolEnv+" when it is a tool's name)")
		fs.String("rules", "", "a rules `FILE` of more denials, one 'deny COMMAND [SUB] [: MESSAGE]' a line")
	},
}

func init() {
	for _, c := range []cli.Command{checkCmd, runCmd, serveCmd} {
		prog.Register(c)
	}
}

func main() { prog.Main() }

// gate is the gate the call's flags configure: its commit tool and rules.
func gate(c *cli.Call) (*vmgate.Gate, error) {
	opts := []vmgate.Option{vmgate.WithCommitTool(c.String("commit-tool"))}
	if rules := c.String("rules"); rules != "" {
		r, err := loadRules(rules)
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

// maxRules bounds what is read of a rules file: a rule is a line.
const maxRules = 1 << 20

// loadRules reads a rules file: the command reads it, package vmgate
// parses the text (it touches no file).
func loadRules(path string) (*vmgate.Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRules+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", path, err)
	}
	if len(data) > maxRules {
		return nil, fmt.Errorf("rules: %s: larger than %d bytes", path, maxRules)
	}
	return vmgate.ParseRules(path, data)
}

// gateScript returns the call's gate and its script (-c inline, FILE or
// stdin).
func gateScript(c *cli.Call) (*vmgate.Gate, string, error) {
	g, err := gate(c)
	if err != nil {
		return nil, "", err
	}
	src, err := script(c.String("c"), c.IsSet("c"), c.Args, c.Stdin)
	if err != nil {
		return nil, "", err
	}
	return g, src, nil
}

var checkCmd = cli.Command{
	Name:  "check",
	Usage: "[--json] [-c SCRIPT | FILE | -]",
	Short: "Decide one script, exit 0 allowed and 1 refused.",
	Long:  `A refusal prints its message (with --json, every verdict prints its JSON).`,
	Flags: func(fs *flag.FlagSet) {
		fs.Bool("json", false, `print {"allowed","git","reason","message",...} as JSON`)
		fs.String("c", "", "the script itself")
	},
	Run: check,
}

func check(c *cli.Call) error {
	g, src, err := gateScript(c)
	if err != nil {
		return err
	}
	v := g.Check(src)
	if c.Bool("json") {
		data, _ := json.Marshal(v)
		fmt.Fprintf(c.Stdout, "%s\n", data)
	} else if !v.Allowed {
		fmt.Fprintln(c.Stdout, v.Message)
	}
	if !v.Allowed {
		return cli.Exit(cli.ExitFail)
	}
	return nil
}

var runCmd = cli.Command{
	Name:  "run",
	Usage: "[--shell SH | --machine CMD] [-c SCRIPT | FILE | -]",
	Short: "Decide a script, then run it with the machine's shell only if allowed.",
	Long:  `Exits with the script's exit, or 1 refused, before anything ran.`,
	Flags: func(fs *flag.FlagSet) {
		fs.String("c", "", "the script itself")
		fs.String("shell", "bash", "the machine's shell: runs SH -c SCRIPT")
		fs.String("machine", "", "a command that receives the script on stdin (e.g. 'ssh vm bash -s'); wins over --shell")
	},
	Run: run,
}

func run(c *cli.Call) error {
	g, src, err := gateScript(c)
	if err != nil {
		return err
	}
	// Decide first: a refused script never starts the machine's shell.
	if v := g.Check(src); !v.Allowed {
		fmt.Fprintln(c.Stderr, v.Message)
		return cli.Exit(cli.ExitFail)
	}
	sig := cli.CatchSignals()
	defer sig.Stop()
	ctx := sig.Context()
	m := machine.Machine{Shell: c.String("shell"), Command: c.String("machine")}
	stdin := c.Stdin
	if len(c.Args) == 1 && c.Args[0] == "-" || len(c.Args) == 0 && !c.IsSet("c") {
		stdin = nil // the script came from stdin: nothing is left to give it
	}
	code, err := m.Run(ctx, src, stdin, c.Stdout, c.Stderr)
	if err != nil {
		return cli.Failf(cli.ExitFail, "cannot start the machine's shell: %v", err)
	}
	if code != 0 {
		return cli.Exit(code)
	}
	return nil
}

var serveCmd = cli.Command{
	Name:  "serve",
	Usage: "[--machine CMD] [--poll D] [--parallel N] [--timeout D]",
	Short: "Run the gate as a daemon over $SPOOL_DIR/gate/.",
	Long:  `Runs until SIGTERM or SIGINT; the first lets running scripts finish for --grace, the second stops them at once.`,
	Flags: func(fs *flag.FlagSet) {
		fs.String("machine", "", "run allowed requests with this command, which receives the script on stdin")
		cli.Duration(fs, "poll", 0, "poll gate/in/ at this interval instead of inotify (NFS, FUSE)")
		cli.Duration(fs, "rescan", time.Minute, "safety-net rescan interval with inotify")
		fs.Int("parallel", 2, "allowed scripts run at once")
		cli.Duration(fs, "timeout", 0, "stop a run after this long (0: never)")
		cli.Duration(fs, "grace", 10*time.Second, "on SIGTERM, how long running scripts may finish")
		fs.String("log-level", "info", "debug, info, warn or error")
		fs.String("metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:8378); empty: off")
		fs.String("writers-group", "", "the `GROUP` whose members may write requests: gate/in/ becomes 0770 and that group's (never the spool's own group, its readers); empty: only this user and root")
	},
	Run: serve,
}

func serve(c *cli.Call) error {
	// Signals are caught from the start; the first lets running scripts
	// finish for --grace, the second stops them at once.
	sig := cli.CatchSignals()
	defer sig.Stop()
	ctx := sig.Context()
	mach, metrics, parallel := c.String("machine"), c.String("metrics-listen"), c.Int("parallel")
	writers, member, err := writersGroup(c.String("writers-group"))
	if err != nil {
		return err
	}
	if err := c.NoOperands(); err != nil {
		return err
	}
	if parallel < 1 {
		return c.Usagef("--parallel must be at least 1")
	}
	g, err := gate(c)
	if err != nil {
		return err
	}
	log, err := ops.Logger(c.Stderr, c.String("log-level"))
	if err != nil {
		return cli.Usagef("%v", err)
	}
	// The spool is made if missing (the gate may be the only part of it
	// on this machine); every file of it is then reached through package
	// spool.
	sp, err := spool.Create(spool.Locate(c.String("spool"), c.Getenv, os.Getuid()))
	if err != nil {
		return err
	}
	defer sp.Close()
	// As root, with --machine, the gate runs what in/ holds: a spool that
	// another user could write or swap would have root run their script,
	// so it is refused as spoold refuses it.
	if err := sp.CheckRootSafe(os.Geteuid()); err != nil {
		return err
	}
	// Whoever may write a request may have the machine run it: only this
	// user's, root's and the writers group's members' requests are read
	// (docs/operations.md, "Who owns what"); a member of the spool's
	// group, a reader, is none of them.
	sp.TrustOwners(os.Geteuid(), 0)
	if member != nil {
		sp.TrustMembers(c.String("writers-group"), member)
	}
	dir := sp.Path(spool.GateDir)
	cfg := server.Config{
		Spool: sp, Gate: g, Log: log, Poll: c.Duration("poll"), Rescan: c.Duration("rescan"),
		Parallel: parallel, Timeout: c.Duration("timeout"), Grace: c.Duration("grace"), Now: sig.Now(),
		WritersGroup: writers,
	}
	if mach != "" {
		cfg.Machine = &machine.Machine{Command: mach}
	}
	svc := ops.NewService(prog.Name, true, log)
	if metrics != "" {
		cfg.Metrics = ops.NewGateMetrics(svc.Registry)
		stop, err := svc.ServeMetrics(metrics)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg.Ready = func() {
		svc.Ready()
		log.WithFields(map[string]any{"dir": dir, "machine": mach}).Info("vmgate serving")
	}
	sig.OnSignal(func(os.Signal) { svc.Stopping() }, nil)
	// The watchdog is pinged only while the loop goes round and the gate
	// directory answers: a stuck daemon is restarted, not kept alive.
	pulse := &ops.Pulse{}
	cfg.Beat = pulse.Beat
	svc.Watchdog(ctx, pulse.Within(30*time.Second), ops.DirHealth(dir))
	if err := server.Serve(ctx, cfg); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "vmgate: "))
	}
	log.Info("vmgate stopped")
	return nil
}

// writersGroup resolves --writers-group (a name or a gid) to its gid, and
// says whether a uid is one of its members, primary group or not, as the
// user database says at the time a request is read (a member removed is
// no longer trusted). Empty: no group, 0 and nil.
func writersGroup(name string) (int, func(uid uint32) bool, error) {
	if name == "" {
		return 0, nil, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			g, err = user.LookupGroupId(name)
		}
	}
	if err != nil {
		return 0, nil, cli.Usagef("--writers-group: %v", err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil || gid <= 0 {
		return 0, nil, cli.Usagef("--writers-group %s: gid %s cannot be the writers' (root's group is not one)", name, g.Gid)
	}
	member := func(uid uint32) bool {
		u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
		if err != nil {
			return false
		}
		ids, err := u.GroupIds()
		if err != nil {
			return u.Gid == g.Gid
		}
		return slices.Contains(ids, g.Gid) || u.Gid == g.Gid
	}
	return gid, member, nil
}
