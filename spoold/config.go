package spoold

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
)

// Verdict is the script gate's decision, as spoold needs it: whether the
// script may run, and the message and reason to record when it may not.
type Verdict struct {
	Allowed bool
	Reason  string
	Message string
}

// Gate decides a script before anything of it runs. cmd/spoold adapts the
// vmgate package to it; keeping it a function keeps this package free of
// the gate's insides (and testable without it). commitTool is the name
// the job's spec gives its client's commit tool (CommitToolEnv in its
// env, "" if none): the refusal names it rather than spoold's
// --commit-tool. It changes the message, never the decision.
type Gate func(script, commitTool string) Verdict

// CommitToolEnv is the spec's env variable that names the commit tool of
// the client the job runs for (vmgate.CommitToolEnv).
const CommitToolEnv = "VMSPOOL_COMMIT_TOOL"

// Config is everything a Daemon is told. cmd/spoold builds it once from its
// flags; the package reads no flag and no environment variable itself.
type Config struct {
	// Spool is the tree to serve; the daemon does not close it.
	Spool *spool.Spool
	// Workers is how many jobs run at once in this daemon (default 1).
	Workers int
	// Lease is the lease written at claim (default 30s); the heartbeat
	// runs every Lease/6 (fence.go) and recovery every Lease/2 (daemon.go).
	Lease time.Duration
	// Grace is how long a shutdown waits for running jobs (default 10s).
	Grace time.Duration
	// KillGrace is how long a process group has between SIGTERM and
	// SIGKILL (default 5s).
	KillGrace time.Duration
	// Host names this host in leases (default os.Hostname()); Worker names
	// this daemon (default host:pid).
	Host, Worker string
	// Poll, when set, replaces inotify with a full rescan every Poll, for
	// shared filesystems where inotify sees nothing.
	Poll time.Duration
	// Rescan is the safety-net rescan in inotify mode (default 30s): other
	// hosts' changes and a dropped watch are never reported.
	Rescan time.Duration
	// MaxTimeout caps every job's timeout, and is the timeout of a job
	// that has none (0: no cap).
	MaxTimeout time.Duration
	// Gate decides scripts. Nil refuses every script.
	Gate Gate
	// Env is the base environment of every job (cmd/spoold passes PATH,
	// HOME, LANG and a few more from its own); the spec's env goes over
	// it and the SPOOL_* variables over both.
	Env []string
	// ScriptEnv adds names (NAME, or PREFIX* for a prefix) to what a
	// script job's spec may set in its env beyond the default allowlist
	// (docs/spoold.md, "A script job's environment"); a name that may
	// choose what an allowed command runs (PATH, HOME, GIT_*...) is
	// refused by New.
	ScriptEnv []string
	// Cgroup is how jobs are ended with their run: CgroupAuto (the
	// default) in a cgroup per job where spoold can make one, CgroupOn
	// the same or Run fails, CgroupOff by process group and session only
	// (docs/spoold.md, "Ending what a job started").
	Cgroup string
	// Shared says whether hosts other than this one may use the spool,
	// and so whether a run is fenced (ended when its heartbeat cannot be
	// written for half the lease): SharedAuto (the default) decides by the
	// spool's filesystem and Poll, SharedOn always, SharedOff never until
	// a lease of another host is seen (sharing.go).
	Shared string
	// WorkDir is the working directory of a job whose spec names none, and
	// what a relative cwd is relative to (default spoold's own).
	WorkDir string
	// Log receives one line per thing that happened (default: discard).
	Log *logrus.Logger
	// Metrics counts what happened, for the metrics textfile; nil counts
	// nothing (its methods are nil-safe).
	Metrics *ops.SpooldMetrics
	// Limits are every job's limits on what it writes into the tree
	// (spool.Limits), unless its spec asks for others; Ceilings bound what
	// a spec may ask. A zero field: no limit.
	Limits, Ceilings spool.Limits
	// Floor is the free space below which no job is claimed (running ones
	// go on); zero: none.
	Floor spool.Floor
	// ClockOffset moves this daemon's clock (Spool.SetClockOffset): a
	// host whose clock is off, played in tests of many hosts on one
	// machine. cmd/spoold sets it only from the test-only
	// VMSPOOL_TEST_CLOCK_OFFSET.
	ClockOffset time.Duration
	// Beat, if set, is called each time the daemon's loop of timed work
	// (the recovery, the waiting chats' retry, the free space) goes round,
	// at least every second while it is not stuck: cmd/spoold's watchdog
	// pings systemd only while it beats, so that a spoold alive but stuck
	// is restarted and its jobs recovered (docs/operations.md, "What the
	// units do").
	Beat func()
	// Ready, if set, is called once the daemon serves: the watch is set,
	// the first scan and recovery are done and the workers started (for
	// systemd's READY=1).
	Ready func()
}

func (c *Config) fill() error {
	if c.Spool == nil {
		return errors.New("spoold: no spool")
	}
	switch c.Cgroup {
	case "":
		c.Cgroup = CgroupAuto
	case CgroupAuto, CgroupOn, CgroupOff:
	default:
		return fmt.Errorf("spoold: cgroup %q: want auto, on or off", c.Cgroup)
	}
	switch c.Shared {
	case "":
		c.Shared = SharedAuto
	case SharedAuto, SharedOn, SharedOff:
	default:
		return fmt.Errorf("spoold: shared %q: want auto, on or off", c.Shared)
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Lease <= 0 {
		c.Lease = spool.DefaultLease
	}
	if c.Lease < 100*time.Millisecond {
		return fmt.Errorf("spoold: lease %v is too short (at least 100ms)", c.Lease)
	}
	if c.Grace < 0 {
		c.Grace = 0
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 5 * time.Second
	}
	if c.Rescan <= 0 {
		c.Rescan = 30 * time.Second
	}
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("spoold: host name: %w (pass --host)", err)
		}
		c.Host = h
	}
	if c.Worker == "" {
		c.Worker = fmt.Sprintf("%s:%d", c.Host, os.Getpid())
	}
	if c.WorkDir == "" {
		d, err := os.Getwd()
		if err != nil {
			d = "/"
		}
		c.WorkDir = d
	}
	if c.Log == nil {
		c.Log = ops.Discard()
	}
	return nil
}
