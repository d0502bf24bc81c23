package ops

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listenNotify makes a unixgram socket like systemd's and points
// NOTIFY_SOCKET at it.
func listenNotify(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

func readDatagram(t *testing.T, c *net.UnixConn, within time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no notify datagram within %s: %v", within, err)
	}
	return string(buf[:n])
}

func TestNotifierSendsReadyStoppingStatus(t *testing.T) {
	c := listenNotify(t)
	n := NewNotifier()
	for _, tc := range []struct {
		send func() error
		want string
	}{
		{n.Ready, "READY=1"},
		{func() error { return n.Status("3 jobs running") }, "STATUS=3 jobs running"},
		{n.Stopping, "STOPPING=1"},
	} {
		if err := tc.send(); err != nil {
			t.Fatal(err)
		}
		if got := readDatagram(t, c, 2*time.Second); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestNotifierWithoutSystemdDoesNothing(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	var n *Notifier // nil works too
	for _, nn := range []*Notifier{NewNotifier(), n} {
		if err := nn.Ready(); err != nil {
			t.Error(err)
		}
		if err := nn.Stopping(); err != nil {
			t.Error(err)
		}
		d, err := nn.StartWatchdog(t.Context(), nil)
		if d != 0 || err != nil {
			t.Errorf("StartWatchdog without WATCHDOG_USEC = %v, %v; want 0, nil", d, err)
		}
	}
}

func TestNotifierReportsAMissingSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	err := NewNotifier().Ready()
	if err == nil || !strings.Contains(err.Error(), "READY=1") {
		t.Fatalf("Ready to a missing socket: %v; want an error naming READY=1", err)
	}
}

func TestWatchdogPingsAtHalfTheInterval(t *testing.T) {
	c := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int((200 * time.Millisecond).Microseconds())))
	t.Setenv("WATCHDOG_PID", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d, err := NewNotifier().StartWatchdog(ctx, nil)
	if err != nil || d != 200*time.Millisecond {
		t.Fatalf("StartWatchdog = %v, %v; want 200ms", d, err)
	}
	for i := 0; i < 3; i++ {
		if got := readDatagram(t, c, 2*time.Second); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: got %q", i, got)
		}
	}
}

func TestWatchdogIsNotOursWhenWatchdogPIDNamesAnother(t *testing.T) {
	listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "1") // a job inherits the daemon's variables
	d, err := NewNotifier().StartWatchdog(t.Context(), nil)
	if d != 0 || err != nil {
		t.Fatalf("StartWatchdog for another pid = %v, %v; want 0, nil", d, err)
	}
}

func TestWatchdogWithholdsPingsWhileUnhealthy(t *testing.T) {
	c := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "")
	var sick atomic.Bool
	sick.Store(true)
	healthy := func() error {
		if sick.Load() {
			return errors.New("stuck")
		}
		return nil
	}
	if _, err := NewNotifier().StartWatchdog(t.Context(), healthy); err != nil {
		t.Fatal(err)
	}
	if got := readDatagram(t, c, 2*time.Second); got != "STATUS=unhealthy: stuck" {
		t.Fatalf("first message while unhealthy: %q", got)
	}
	// No ping for a few intervals.
	c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	buf := make([]byte, 512)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("got %q while unhealthy; want nothing", buf[:n])
	}
	sick.Store(false)
	if got := readDatagram(t, c, 2*time.Second); got != "STATUS=healthy again" {
		t.Fatalf("after recovery: %q", got)
	}
	if got := readDatagram(t, c, 2*time.Second); got != "WATCHDOG=1" {
		t.Fatalf("after recovery: %q; want a ping", got)
	}
}

func TestPulse(t *testing.T) {
	var p Pulse
	check := p.Within(50 * time.Millisecond)
	if err := check(); err != nil {
		t.Fatalf("fresh pulse: %v", err)
	}
	time.Sleep(80 * time.Millisecond) // the point: the pulse grows older than the check's 50 ms
	if err := check(); err == nil {
		t.Fatal("pulse not beaten for 80ms passed a 50ms check")
	}
	p.Beat()
	if err := check(); err != nil {
		t.Fatalf("just beaten: %v", err)
	}
}

func TestDirHealth(t *testing.T) {
	dir := t.TempDir()
	check := DirHealth(dir)
	if err := check(); err != nil {
		t.Fatalf("existing dir: %v", err)
	}
	os.Remove(dir)
	if err := check(); err == nil {
		t.Fatal("a removed spool passed the health check")
	}
}
