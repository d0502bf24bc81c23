// Command spoold runs the job spool's queue: it claims each queued job,
// runs it, relays its progress to progress/<chat> and writes its result,
// and recovers the jobs of workers that died. The work is package spoold;
// this file is flags, signals and logging.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/spoold"
	"github.com/vmspool/vmspool/vmgate"
)

const usage = `usage: spoold [--spool DIR] [--workers N] [--lease D] [--grace D] [--kill-grace D]
              [--host NAME] [--worker NAME] [--poll D] [--rescan D] [--max-timeout D]
              [--commit-tool NAME] [--metrics-file PATH] [--metrics-every D] [--log-level L]
              [--max-log SIZE] [--max-events SIZE] [--max-event-rate N] [--limits-ceiling N]
              [--min-free SIZE] [--min-free-percent P] [--min-free-inodes N]

Runs the spool's queue until SIGTERM or SIGINT; then stops claiming, lets
running jobs finish for --grace, and puts any still running back in the
queue (or ends them, per their attempts) before it exits 0. A second
signal ends them at once. docs/spoold.md says how it runs and recovers jobs.

`

// jobEnv is what a job inherits of spoold's own environment; the rest of
// it (credentials, NOTIFY_SOCKET, the caller's SPOOL_*) stays out.
var jobEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM"}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	// Signals are caught from the very start: a SIGTERM that comes while
	// the tree is being made must find the handler (and is acted on once
	// the daemon runs), not the default action.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	fs := flag.NewFlagSet("spoold", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		dir        = fs.String("spool", "", "the spool `DIR` (default $SPOOL_DIR, $JOBS_DIR, then the system default)")
		workers    = fs.Int("workers", 1, "jobs run at once by this daemon")
		lease      = cli.Duration(fs, "lease", 30*time.Second, "lease; heartbeat every lease/3, recovery every lease")
		grace      = cli.Duration(fs, "grace", 10*time.Second, "how long a shutdown waits for running jobs")
		killGrace  = cli.Duration(fs, "kill-grace", 5*time.Second, "between SIGTERM and SIGKILL to a job's process group")
		host       = fs.String("host", "", "this host's name in leases (default the host name)")
		worker     = fs.String("worker", "", "this daemon's name in leases (default host:pid)")
		poll       = cli.Duration(fs, "poll", 0, "rescan every D instead of inotify (shared filesystems)")
		rescan     = cli.Duration(fs, "rescan", 30*time.Second, "safety-net rescan interval with inotify")
		maxTimeout = cli.Duration(fs, "max-timeout", 0, "cap on every job's timeout, and the timeout of jobs without one (0: none)")
		commitTool = fs.String("commit-tool", vmgate.DefaultCommitTool, "the commit tool the gate's refusals name")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		metricsOut = fs.String("metrics-file", "", "node_exporter textfile `PATH` for the metrics (default <spool>/metrics/spoold-<host>.prom; off: none)")
		metricsDt  = cli.Duration(fs, "metrics-every", ops.DefaultTextfileEvery, "how often the metrics textfile is written")
		maxLog     = fs.String("max-log", "64MiB", "cut a job's log back when it passes `SIZE` (0: no limit)")
		maxEvents  = fs.String("max-events", "64MiB", "end a job whose events pass `SIZE` (0: no limit)")
		eventRate  = fs.Int("max-event-rate", 100, "relay at most `N` events a second of a job to its chat (0: no limit)")
		ceiling    = fs.Int("limits-ceiling", 4, "a spec's \"limits\" may ask for up to `N` times the limits above")
		minFree    = fs.String("min-free", spool.FormatSizeFlag(spool.DefaultFloor.Bytes), "claim no new job while less than `SIZE` is free (0: off)")
		minPct     = fs.Float64("min-free-percent", spool.DefaultFloor.Percent, "nor while less than `P` percent is free (0: off)")
		minInodes  = fs.Int64("min-free-inodes", spool.DefaultFloor.Inodes, "nor while fewer than `N` inodes are free (0: off)")
		version    = fs.Bool("version", false, "print the version and exit")
	)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(os.Stdout, usage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return cli.ExitOK
		}
		fmt.Fprintf(stderr, "spoold: %v (see spoold -h)\n", err)
		return cli.ExitUsage
	}
	if *version {
		fmt.Println(cli.Version("spoold"))
		return cli.ExitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spoold: unexpected argument %q (see spoold -h)\n", fs.Arg(0))
		return cli.ExitUsage
	}
	switch {
	case *workers < 1 || *workers > 1024:
		return usageErr(stderr, "--workers %d: want 1 to 1024", *workers)
	case *lease < 100*time.Millisecond:
		return usageErr(stderr, "--lease %v: want at least 100ms", *lease)
	case *grace < 0 || *killGrace <= 0:
		return usageErr(stderr, "--grace and --kill-grace must be positive")
	case *poll < 0 || *rescan <= 0 || *maxTimeout < 0 || *metricsDt <= 0:
		return usageErr(stderr, "--poll, --rescan, --max-timeout and --metrics-every must be positive")
	case *eventRate < 0 || *ceiling < 1 || *minPct < 0 || *minPct > 100 || *minInodes < 0:
		return usageErr(stderr, "--max-event-rate and --min-free-inodes must not be negative, --limits-ceiling at least 1, --min-free-percent 0 to 100")
	}
	var limits spool.Limits
	var floor spool.Floor
	for _, sz := range []struct {
		name string
		flag string
		to   *int64
	}{{"--max-log", *maxLog, &limits.Log}, {"--max-events", *maxEvents, &limits.Events}, {"--min-free", *minFree, &floor.Bytes}} {
		n, err := spool.ParseSize(sz.flag)
		if err != nil {
			return usageErr(stderr, "%s: %v", sz.name, err)
		}
		*sz.to = n
	}
	limits.EventRate = *eventRate
	floor.Percent, floor.Inodes = *minPct, *minInodes
	ceilings := spool.Limits{Log: limits.Log * int64(*ceiling), Events: limits.Events * int64(*ceiling), EventRate: limits.EventRate * *ceiling}
	log, err := cli.Logger(stderr, *logLevel)
	if err != nil {
		return usageErr(stderr, "%v", err)
	}
	gate, err := vmgate.New(vmgate.WithCommitTool(*commitTool))
	if err != nil {
		return usageErr(stderr, "%v", err)
	}
	path := spool.ResolveDir(*dir, os.Getenv, os.Getuid())
	s, err := spool.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "spoold: %v\n", err)
		return cli.ExitFail
	}
	defer s.Close()
	// As root, a spool another user can write would have root run what
	// that user queues: refused. Whoever we run as, only our own and
	// root's specs and markers are run (docs/operations.md, "Who owns what").
	if err := spool.CheckRootSafe(s.Dir, os.Geteuid()); err != nil {
		fmt.Fprintf(stderr, "spoold: %v\n", err)
		return cli.ExitFail
	}
	s.TrustOwners(os.Geteuid(), 0)
	env := jobEnvironment(os.LookupEnv, os.Executable)
	// Metrics go to a node_exporter textfile: spoold serves no HTTP.
	reg := ops.NewRegistry("spoold", false)
	metrics, gateMetrics := ops.NewSpooldMetrics(reg), ops.NewGateMetrics(reg)
	notifier := ops.NewNotifier()
	d, err := spoold.New(spoold.Config{
		Spool: s, Workers: *workers, Lease: *lease, Grace: *grace, KillGrace: *killGrace,
		Host: *host, Worker: *worker, Poll: *poll, Rescan: *rescan, MaxTimeout: *maxTimeout,
		Env: env, Log: log, Metrics: metrics, Limits: limits, Ceilings: ceilings, Floor: floor,
		Ready: func() { notifier.Ready() },
		Gate: func(script string) spoold.Verdict {
			began := time.Now()
			v := gate.Check(script)
			r, git := "", ""
			if v.Reason != nil {
				r = *v.Reason
			}
			if v.Git != nil {
				git = *v.Git
			}
			gateMetrics.Decision(v.Allowed, r, git, time.Since(began))
			return spoold.Verdict{Allowed: v.Allowed, Reason: r, Message: v.Message}
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "spoold: %v\n", strings.TrimPrefix(err.Error(), "spoold: "))
		return cli.ExitFail
	}

	ctx, stop := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		log.WithField("signal", sig.String()).Info("signal: stopping after the grace")
		notifier.Stopping()
		stop()
		sig = <-sigs
		log.WithField("signal", sig.String()).Info("second signal: stopping now")
		d.StopNow()
	}()
	// The watchdog is pinged while the spool answers a stat: a spool gone
	// or hung gets the unit restarted rather than kept "alive".
	if _, err := notifier.StartWatchdog(ctx, ops.DirHealth(s.Dir)); err != nil {
		log.WithError(err).Warn("no watchdog")
	}
	// The textfile outlives ctx: its last write, after the jobs ended,
	// holds the final counts.
	mctx, stopMetrics := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	if prom := metricsPath(*metricsOut, s.Dir, *host); prom != "" {
		go func() {
			defer close(mdone)
			ops.WriteTextfileLoopMode(mctx, reg, prom, metricsMode(prom, s.Dir), *metricsDt, func(err error) {
				log.WithError(err).Warn("cannot write the metrics textfile")
			})
		}()
	} else {
		close(mdone)
	}
	err = d.Run(ctx)
	stopMetrics()
	<-mdone
	if err != nil {
		fmt.Fprintf(stderr, "spoold: %v\n", strings.TrimPrefix(err.Error(), "spoold: "))
		return cli.ExitFail
	}
	return cli.ExitOK
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

// metricsMode is the textfile's mode: the tree's (0640, its directory 0750)
// under the spool, where only the spool's group may read; world-readable
// elsewhere (the unit's /var/lib/vmspool/metrics), so that node_exporter
// reads it without access to the spool.
func metricsMode(prom, dir string) os.FileMode {
	abs, err1 := filepath.Abs(prom)
	root, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return spool.FileMode
	}
	if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return spool.FileMode
	}
	return ops.PublicTextfileMode
}

func usageErr(w io.Writer, format string, args ...any) int {
	fmt.Fprintf(w, "spoold: "+format+" (see spoold -h)\n", args...)
	return cli.ExitUsage
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
