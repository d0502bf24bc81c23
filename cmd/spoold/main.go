// Command spoold runs the job spool's queue: it claims each queued job,
// runs it, relays its progress to progress/<chat> and writes its result,
// and recovers the jobs of workers that died. The work is package spoold;
// this file is flags, signals and logging.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/spoold"
	"github.com/vmspool/vmspool/vmgate"
)

var prog = &cli.Program{Name: "spoold"}

func init() {
	prog.Register(cli.Command{
		Usage: `[--spool DIR] [--workers N] [--lease D] [--grace D] [--kill-grace D]
       [--host NAME] [--worker NAME] [--poll D] [--rescan D] [--max-timeout D]
       [--commit-tool NAME] [--metrics-file PATH] [--metrics-every D] [--log-level L]
       [--max-log SIZE] [--max-events SIZE] [--max-event-rate N] [--limits-ceiling N]
       [--min-free SIZE] [--min-free-percent P] [--min-free-inodes N]
       [--script-env NAMES] [--cgroup auto|on|off] [--shared auto|on|off]`,
		Short: "Runs the spool's queue until SIGTERM or SIGINT.",
		Long: `Then it stops claiming, lets running jobs finish for --grace, and puts
any still running back in the queue (or ends them, per their attempts)
before it exits 0. A second signal ends them at once. docs/spoold.md
says how it runs and recovers jobs.`,
		Flags: declareFlags,
		Run:   run,
	})
}

// clockOffsetEnv moves spoold's clock by a duration, to play a host whose
// clock is off in tests of many hosts on one machine (Go's clock does not
// heed libfaketime). Not a setting: nothing outside tests sets it.
const clockOffsetEnv = "VMSPOOL_TEST_CLOCK_OFFSET"

// jobEnv is what a job inherits of spoold's own environment; the rest of
// it (credentials, NOTIFY_SOCKET, the caller's SPOOL_*) stays out.
var jobEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM"}

func main() { prog.Main() }

// run is spoold: flags, the configuration, the daemon run until the
// signals say stop.
func run(c *cli.Call) error {
	// Signals are caught before anything is made: a SIGTERM that comes
	// while the tree is being made must find the handler (and is acted on
	// once the daemon runs), not the default action.
	sig := cli.CatchSignals()
	defer sig.Stop()
	f, err := parseFlags(c)
	if err != nil {
		return err
	}
	log, err := ops.Logger(c.Stderr, f.logLevel)
	if err != nil {
		return c.Usagef("%v", err)
	}
	gate, err := vmgate.New(vmgate.WithCommitTool(f.commitTool))
	if err != nil {
		return c.Usagef("%v", err)
	}
	s, err := openSpool(f.dir)
	if err != nil {
		return err
	}
	defer s.Close()
	fsys, err := s.Filesystem()
	if err != nil {
		log.WithError(err).Warn("cannot tell the spool's filesystem: its settings are not checked")
	} else if err := spoold.CheckShared(fsys, f.poll, f.lease, f.killGrace); err != nil {
		return cli.Usagef("spool %s: %v", s.RootPath, err)
	}
	if f.clockOffset != 0 {
		// Tests only: a host whose clock is off (docs/spoold.md, "Clocks").
		s.SetClockOffset(f.clockOffset)
		log.WithField("offset", f.clockOffset.String()).Warn("clock offset from " + clockOffsetEnv + " (tests only)")
	}
	// Metrics go to a node_exporter textfile: spoold serves no HTTP.
	svc := ops.NewService("spoold", false, log)
	cfg := f.config(s, log)
	cfg.ClockOffset = f.clockOffset
	cfg.Metrics = ops.NewSpooldMetrics(svc.Registry)
	cfg.Gate = gateFunc(gate, ops.NewGateMetrics(svc.Registry))
	cfg.Ready = svc.Ready
	var health func() error
	cfg.Beat, health = loopPulse(f.lease + 30*time.Second)
	d, err := spoold.New(cfg)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "spoold: "))
	}
	write, err := metricsWriter(s, f.metricsOut, f.host)
	if err != nil {
		return err
	}
	ctx := sig.Context()
	sig.OnSignal(func(first os.Signal) {
		log.WithField("signal", first.String()).Info("signal: stopping after the grace")
		svc.Stopping()
	}, func() {
		log.Info("second signal: stopping now")
		d.StopNow()
	})
	// The watchdog is pinged while the spool answers a stat and the
	// daemon's loop of timed work goes round: a spool gone or hung, or a
	// spoold alive but stuck, gets the unit restarted rather than kept
	// "alive" (on its own host a live spoold keeps its jobs, however old
	// their heartbeats: the restart is what recovers them). The loop goes
	// round every second; a recovery round reads a lease per running job,
	// so it is given the lease, and 30 s more, before it counts as stuck.
	svc.Watchdog(ctx, health, ops.DirHealth(s.RootPath))
	// The textfile outlives ctx: its last write, after the jobs ended,
	// holds the final counts.
	stopMetrics := svc.Textfile(write, f.metricsEvery)
	err = d.Run(ctx)
	stopMetrics()
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "spoold: "))
	}
	return nil
}

// loopPulse is the daemon's Beat and the watchdog's check of it: an error
// once the loop, having begun, has not gone round for within. Before its
// first round (the first listing of a large spool on a network
// filesystem takes a minute) only the spool's stat is checked.
func loopPulse(within time.Duration) (beat func(), health func() error) {
	pulse := &ops.Pulse{}
	var begun atomic.Bool
	check := pulse.Within(within)
	return func() { begun.Store(true); pulse.Beat() }, func() error {
		if !begun.Load() {
			return nil
		}
		return check()
	}
}

// flags are spoold's command line, checked.
type flags struct {
	dir, host, worker, commitTool, logLevel, metricsOut string
	workers                                             int
	lease, grace, killGrace, poll, rescan, maxTimeout   time.Duration
	metricsEvery                                        time.Duration
	clockOffset                                         time.Duration
	limits, ceilings                                    spool.Limits
	floor                                               spool.Floor
	scriptEnv                                           []string
	cgroup, shared                                      string
}

// declareFlags declares spoold's flags.
func declareFlags(fs *flag.FlagSet) {
	fs.String("spool", "", "the spool `DIR` (default $SPOOL_DIR, $JOBS_DIR, then as spool -h says)")
	fs.Int("workers", 1, "jobs run at once by this daemon, each of its own chat (the packaged unit runs 4, so that one chat's question holds only that chat)")
	cli.Duration(fs, "lease", spool.DefaultLease, "lease; heartbeat every lease/6, recovery every lease/2")
	cli.Duration(fs, "grace", 10*time.Second, "how long a shutdown waits for running jobs")
	cli.Duration(fs, "kill-grace", 5*time.Second, "between SIGTERM and SIGKILL to a job's process group")
	fs.String("host", "", "this host's name in leases (default the host name)")
	fs.String("worker", "", "this daemon's name in leases (default host:pid)")
	cli.Duration(fs, "poll", 0, "rescan every D instead of inotify (shared filesystems)")
	cli.Duration(fs, "rescan", 30*time.Second, "safety-net rescan interval with inotify")
	cli.Duration(fs, "max-timeout", 0, "cap on every job's timeout, and the timeout of jobs without one (0: none)")
	fs.String("commit-tool", vmgate.DefaultCommitTool, "the commit tool the gate's refusals name")
	fs.String("log-level", "info", "debug, info, warn or error")
	fs.String("metrics-file", "", "node_exporter textfile `PATH` for the metrics (default <spool>/metrics/spoold-<host>.prom; off: none)")
	cli.Duration(fs, "metrics-every", ops.DefaultTextfileEvery, "how often the metrics textfile is written")
	fs.String("max-log", "64MiB", "cut a job's log back when it passes `SIZE` (0: no limit)")
	fs.String("max-events", "64MiB", "end a job whose events pass `SIZE` (0: no limit)")
	fs.Int("max-event-rate", 100, "relay at most `N` events a second of a job to its chat (0: no limit)")
	fs.Int("limits-ceiling", 4, "a spec's \"limits\" may ask for up to `N` times the limits above")
	fs.String("min-free", spool.FormatSizeFlag(spool.DefaultFloor.Bytes), "claim no new job while less than `SIZE` is free (0: off)")
	fs.Float64("min-free-percent", spool.DefaultFloor.Percent, "nor while less than `P` percent is free (0: off)")
	fs.Int64("min-free-inodes", spool.DefaultFloor.Inodes, "nor while fewer than `N` inodes are free (0: off)")
	fs.String("script-env", "", "`NAMES` (comma-separated; PREFIX* for a prefix) a script job's spec may set beyond the default allowlist")
	fs.String("shared", spoold.SharedAuto, "`MODE`: whether other hosts may use the spool, and so whether a run is ended when its heartbeat cannot be written for half the lease: auto (by the filesystem and --poll), on, off (a lease of another host seen turns it on)")
	fs.String("cgroup", spoold.CgroupAuto, "`MODE` of ending a job's processes with it: auto (a cgroup per job where one can be made), on (the same, or exit 1), off (process group and session)")
}

// parseFlags reads and checks the command line.
func parseFlags(c *cli.Call) (f flags, err error) {
	f = flags{
		dir: c.String("spool"), host: c.String("host"), worker: c.String("worker"), commitTool: c.String("commit-tool"),
		logLevel: c.String("log-level"), metricsOut: c.String("metrics-file"), workers: c.Int("workers"),
		lease: c.Duration("lease"), grace: c.Duration("grace"), killGrace: c.Duration("kill-grace"),
		poll: c.Duration("poll"), rescan: c.Duration("rescan"), maxTimeout: c.Duration("max-timeout"),
		metricsEvery: c.Duration("metrics-every"), cgroup: c.String("cgroup"), shared: c.String("shared"),
		floor: spool.Floor{Percent: c.Float64("min-free-percent"), Inodes: c.Int64("min-free-inodes")},
	}
	maxLog, maxEvents, minFree := c.String("max-log"), c.String("max-events"), c.String("min-free")
	eventRate, ceiling, scriptEnv := c.Int("max-event-rate"), c.Int("limits-ceiling"), c.String("script-env")
	bad := func(format string, args ...any) (flags, error) { return f, c.Usagef(format, args...) }
	if err := c.NoOperands(); err != nil {
		return f, err
	}
	switch {
	case f.workers < 1 || f.workers > 1024:
		return bad("--workers %d: want 1 to 1024", f.workers)
	case f.lease < 100*time.Millisecond:
		return bad("--lease %v: want at least 100ms", f.lease)
	case f.grace < 0 || f.killGrace <= 0:
		return bad("--grace and --kill-grace must be positive")
	case f.poll < 0 || f.rescan <= 0 || f.maxTimeout < 0 || f.metricsEvery <= 0:
		return bad("--poll, --rescan, --max-timeout and --metrics-every must be positive")
	case eventRate < 0 || ceiling < 1 || f.floor.Percent < 0 || f.floor.Percent > 100 || f.floor.Inodes < 0:
		return bad("--max-event-rate and --min-free-inodes must not be negative, --limits-ceiling at least 1, --min-free-percent 0 to 100")
	}
	for _, sz := range []struct {
		name string
		flag string
		to   *int64
	}{{"--max-log", maxLog, &f.limits.Log}, {"--max-events", maxEvents, &f.limits.Events}, {"--min-free", minFree, &f.floor.Bytes}} {
		n, err := spool.ParseSize(sz.flag)
		if err != nil {
			return bad("%s: %v", sz.name, err)
		}
		*sz.to = n
	}
	if v := c.Getenv(clockOffsetEnv); v != "" {
		if f.clockOffset, err = time.ParseDuration(v); err != nil {
			return bad("%s=%q: want a duration like -20s", clockOffsetEnv, v)
		}
	}
	f.limits.EventRate = eventRate
	if f.cgroup != spoold.CgroupAuto && f.cgroup != spoold.CgroupOn && f.cgroup != spoold.CgroupOff {
		return bad("--cgroup %q: want auto, on or off", f.cgroup)
	}
	if f.shared != spoold.SharedAuto && f.shared != spoold.SharedOn && f.shared != spoold.SharedOff {
		return bad("--shared %q: want auto, on or off", f.shared)
	}
	for _, n := range strings.Split(scriptEnv, ",") {
		if n = strings.TrimSpace(n); n != "" {
			f.scriptEnv = append(f.scriptEnv, n)
		}
	}
	if _, err := spoold.NewScriptEnv(f.scriptEnv); err != nil {
		return bad("--script-env: %v", err)
	}
	f.ceilings = spool.Limits{Log: f.limits.Log * int64(ceiling), Events: f.limits.Events * int64(ceiling), EventRate: f.limits.EventRate * ceiling}
	return f, nil
}

// config is the daemon's configuration the flags give; cmd adds the
// metrics, the gate and the readiness call.
func (f flags) config(s *spool.Spool, log *logrus.Logger) spoold.Config {
	return spoold.Config{
		Spool: s, Workers: f.workers, Lease: f.lease, Grace: f.grace, KillGrace: f.killGrace,
		Host: f.host, Worker: f.worker, Poll: f.poll, Rescan: f.rescan, MaxTimeout: f.maxTimeout,
		Env: jobEnvironment(os.LookupEnv, os.Executable), Log: log,
		Limits: f.limits, Ceilings: f.ceilings, Floor: f.floor, ScriptEnv: f.scriptEnv, Cgroup: f.cgroup, Shared: f.shared,
	}
}

// openSpool makes (or opens) the tree, and decides whose jobs it runs: as
// root, a spool another user can write would have root run what that user
// queues, so it is refused; whoever we run as, only our own and root's
// specs and markers are run (docs/operations.md, "Who owns what").
func openSpool(dir string) (*spool.Spool, error) {
	s, err := spool.Create(spool.Locate(dir, os.Getenv, os.Getuid()))
	if err != nil {
		return nil, err
	}
	if err := s.CheckRootSafe(os.Geteuid()); err != nil {
		s.Close()
		return nil, err
	}
	// A spool this daemon cannot write would be served in name only: it
	// would log serving, then leave every job queued.
	if err := s.CheckWritable(); err != nil {
		s.Close()
		return nil, err
	}
	s.TrustOwners(os.Geteuid(), 0)
	return s, nil
}

// gateFunc adapts the vmgate package to spoold's Gate, counting each
// decision. A job whose spec names its client's commit tool (a tool's
// name: vmgate.ValidToolName) is refused in a message naming that one; the
// decision is the same gate's, rules and all.
func gateFunc(gate *vmgate.Gate, m *ops.GateMetrics, opts ...vmgate.Option) spoold.Gate {
	return func(script, commitTool string) spoold.Verdict {
		began := time.Now()
		g := gate
		if commitTool != "" && vmgate.ValidToolName(commitTool) {
			if named, err := vmgate.New(append(opts[:len(opts):len(opts)], vmgate.WithCommitTool(commitTool))...); err == nil {
				g = named
			}
		}
		v := g.Check(script)
		r, git := "", ""
		if v.Reason != nil {
			r = *v.Reason
		}
		if v.Git != nil {
			git = *v.Git
		}
		m.Decision(v.Allowed, r, git, time.Since(began))
		return spoold.Verdict{Allowed: v.Allowed, Reason: r, Message: v.Message}
	}
}

// metricsWriter writes the metrics textfile (nil: none). A textfile
// under the spool is part of the tree and is written through package spool
// with the tree's modes (only the spool's group reads it); one elsewhere
// (the unit's /var/lib/vmspool/metrics) is world-readable, so that
// node_exporter reads it without access to the spool.
func metricsWriter(s *spool.Spool, flag, host string) (ops.TextfileWriter, error) {
	prom := metricsPath(flag, s.RootPath, host)
	if prom == "" {
		return nil, nil
	}
	if !strings.HasSuffix(prom, ".prom") {
		return nil, cli.Usagef("--metrics-file %s: the name must end in .prom (node_exporter reads only those)", prom)
	}
	rel, inside := underSpool(prom, s.RootPath)
	if !inside {
		return ops.PathWriter(prom, ops.PublicTextfileMode), nil
	}
	// The directory is opened at the first write and then held for the
	// daemon's life. One that cannot be opened (a symlink planted there)
	// fails each write, which the textfile loop reports once, and spoold
	// goes on without its textfile.
	var d *spool.Subdir
	base := filepath.Base(rel)
	return func(data []byte) error {
		if d == nil {
			var err error
			if d, err = s.OpenSubdir(filepath.Dir(rel), spool.DirMode); err != nil {
				return fmt.Errorf("metrics textfile %s: refusing to write through it: %w", prom, err)
			}
		}
		return d.WriteAdvisory(base, data)
	}, nil
}

// metricsPath is where the metrics textfile goes: the flag, or
// <spool>/metrics/spoold-<host>.prom, one file a host, since hosts may
// share the spool; "off" writes none.
func metricsPath(flag, dir, host string) string {
	switch flag {
	case "off":
		return ""
	case "":
		if host == "" {
			host, _ = os.Hostname()
		}
		return filepath.Join(dir, "metrics", "spoold-"+strings.ReplaceAll(host, "/", "_")+".prom")
	}
	return flag
}

// underSpool says whether path is inside the spool dir, and its name
// there.
func underSpool(path, dir string) (string, bool) {
	abs, err1 := filepath.Abs(path)
	root, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return "", false
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// jobEnvironment is the base environment of every job: the names of jobEnv
// that spoold has, with PATH made to find the `spool` installed beside
// spoold (bin/ of a checkout, or PREFIX/bin), so that `spool say` and
// `spool ask` work inside a job whatever PATH spoold was started with.
func jobEnvironment(lookup func(string) (string, bool), self func() (string, error)) []string {
	var env []string
	path, _ := lookup("PATH")
	if exe, err := self(); err == nil {
		dir := filepath.Dir(exe)
		if fi, err := os.Stat(filepath.Join(dir, "spool")); err == nil && fi.Mode().IsRegular() && !onPath(path, dir) {
			if path == "" {
				path = dir + ":/usr/local/bin:/usr/bin:/bin"
			} else {
				path += ":" + dir
			}
		}
	}
	for _, k := range jobEnv {
		if k == "PATH" {
			if path != "" {
				env = append(env, "PATH="+path)
			}
			continue
		}
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func onPath(path, dir string) bool {
	for _, p := range filepath.SplitList(path) {
		if filepath.Clean(p) == filepath.Clean(dir) {
			return true
		}
	}
	return false
}
