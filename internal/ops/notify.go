package ops

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks systemd's notify protocol for a Type=notify unit. When
// the daemon was not started by systemd (NOTIFY_SOCKET unset), every
// method does nothing and returns nil, so that the same binary runs from a
// shell, a test or a unit.
//
// The socket is read from the environment by go-systemd at each call.
// spoold passes its jobs none of NOTIFY_SOCKET and WATCHDOG_*; should a
// child inherit them anyway, the units' NotifyAccess=main makes systemd
// ignore what it sends, and WATCHDOG_PID names the daemon, so no child
// takes the watchdog for its own.
type Notifier struct {
	// send is daemon.SdNotify.
	send func(unset bool, state string) (bool, error)
	// watchdog is daemon.SdWatchdogEnabled.
	watchdog func(unset bool) (time.Duration, error)
}

// NewNotifier returns a Notifier over the process's NOTIFY_SOCKET.
func NewNotifier() *Notifier {
	return &Notifier{send: daemon.SdNotify, watchdog: daemon.SdWatchdogEnabled}
}

func (n *Notifier) notify(state string) error {
	if n == nil {
		return nil
	}
	if _, err := n.send(false, state); err != nil {
		return fmt.Errorf("systemd notify %q: %w", state, err)
	}
	return nil
}

// Ready tells systemd that start-up is done: the spool is open, the watches
// are set, the listener is bound. systemd holds back units ordered after
// this one until then.
func (n *Notifier) Ready() error { return n.notify(daemon.SdNotifyReady) }

// Stopping tells systemd that the daemon is shutting down (on a signal):
// systemd then reports the unit as deactivating rather than failed while
// the daemon finishes its grace period.
func (n *Notifier) Stopping() error { return n.notify(daemon.SdNotifyStopping) }

// Status sets the one-line status `systemctl status` shows.
func (n *Notifier) Status(line string) error { return n.notify("STATUS=" + line) }

// StartWatchdog pings systemd's watchdog at half of WatchdogSec
// (WATCHDOG_USEC) until ctx is done. healthy, if not nil, is asked before
// each ping: while it returns an error no ping is sent (and the error is
// shown as the unit's status), so that a daemon whose loop is stuck is
// restarted by systemd instead of being kept alive by a goroutine that
// still runs. It returns the watchdog's timeout, or 0 when systemd set no
// watchdog for this process (then nothing is started).
func (n *Notifier) StartWatchdog(ctx context.Context, healthy func() error) (time.Duration, error) {
	if n == nil {
		return 0, nil
	}
	d, err := n.watchdog(false)
	if err != nil {
		return 0, fmt.Errorf("systemd watchdog: %w", err)
	}
	if d <= 0 {
		return 0, nil
	}
	go n.watchdogLoop(ctx, d/2, healthy)
	return d, nil
}

func (n *Notifier) watchdogLoop(ctx context.Context, every time.Duration, healthy func() error) {
	t := time.NewTicker(every)
	defer t.Stop()
	sick := false
	for {
		if healthy != nil {
			if err := healthy(); err != nil {
				if !sick {
					n.Status("unhealthy: " + err.Error())
				}
				sick = true
			} else {
				if sick {
					n.Status("healthy again")
				}
				sick = false
			}
		}
		if !sick {
			n.notify(daemon.SdNotifyWatchdog)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pulse is the liveness of a daemon's main loop: the loop calls Beat each
// time it goes round, and Within tells the watchdog whether it did so
// recently. The zero Pulse is ready to use and counts as beaten at the
// first Within call, so that a slow start-up is not taken for a hang.
type Pulse struct {
	last monoTime
}

// Beat records that the loop went round now.
func (p *Pulse) Beat() { p.last.Store(time.Now()) }

// Within returns a health check for StartWatchdog: an error when the loop
// has not beaten for longer than d.
func (p *Pulse) Within(d time.Duration) func() error {
	p.last.StoreIfZero(time.Now())
	return func() error {
		if since := time.Since(p.last.Load()); since > d {
			return fmt.Errorf("main loop has not gone round for %s", since.Round(time.Second))
		}
		return nil
	}
}

// DirHealth returns a health check for StartWatchdog that stats dir (the
// spool): a daemon whose spool went away, or hangs (an NFS server that
// stopped answering), stops pinging, and systemd restarts it and says why
// in the journal, instead of a daemon that looks alive and does nothing.
// The check runs in the watchdog's goroutine, so a stat that never returns
// withholds every later ping too, which is the point.
func DirHealth(dir string) func() error {
	return func() error {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
}
