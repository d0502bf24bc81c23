package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestJobEnvironment(t *testing.T) {
	withSpool := t.TempDir()
	os.WriteFile(filepath.Join(withSpool, "spool"), []byte("#!/bin/sh\n"), 0o755)
	without := t.TempDir()
	for _, c := range []struct {
		name string
		env  map[string]string
		self string
		want []string
	}{
		{"spool beside spoold is added", map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/h"}, withSpool + "/spoold",
			[]string{"PATH=/usr/bin:/bin:" + withSpool, "HOME=/h"}},
		{"already on PATH", map[string]string{"PATH": withSpool + ":/bin"}, withSpool + "/spoold",
			[]string{"PATH=" + withSpool + ":/bin"}},
		{"no spool beside spoold", map[string]string{"PATH": "/bin"}, without + "/spoold",
			[]string{"PATH=/bin"}},
		{"no PATH at all", map[string]string{}, withSpool + "/spoold",
			[]string{"PATH=" + withSpool + ":/usr/local/bin:/usr/bin:/bin"}},
		{"secrets stay out", map[string]string{"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x", "SPOOL_JOB": "j"}, without + "/spoold",
			[]string{"PATH=/bin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			self := func() (string, error) { return c.self, nil }
			if got := jobEnvironment(lookup, self); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// The watchdog's check of the daemon's loop: nothing to say before the
// loop's first round, healthy while it goes round, sick once it has not
// for longer than its bound.
func TestLoopPulse(t *testing.T) {
	beat, health := loopPulse(50 * time.Millisecond)
	time.Sleep(80 * time.Millisecond) // time passing is the point: past the bound, before any round
	if err := health(); err != nil {
		t.Errorf("before the first round: %v", err)
	}
	beat()
	if err := health(); err != nil {
		t.Errorf("just after a round: %v", err)
	}
	time.Sleep(80 * time.Millisecond) // past the bound with no round
	if err := health(); err == nil {
		t.Error("no round for longer than the bound, and healthy")
	}
	beat()
	if err := health(); err != nil {
		t.Errorf("going round again: %v", err)
	}
}

// TestUnitWorkers: the packaged unit runs several chats' jobs at once, so
// that one person's open question holds only that chat (it ran one), and
// spoold -h says so.
func TestUnitWorkers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "dist", "systemd", "spoold.service"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S*spoold .*--workers (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("spoold.service: no --workers in ExecStart")
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 4 {
		t.Errorf("spoold.service runs %d workers, want at least 4", n)
	}
	fs := flag.NewFlagSet("spoold", flag.ContinueOnError)
	declareFlags(fs)
	if u := fs.Lookup("workers").Usage; !strings.Contains(u, "the packaged unit runs "+string(m[1])) {
		t.Errorf("spoold -h says of --workers %q, not the unit's %s", u, m[1])
	}
}
