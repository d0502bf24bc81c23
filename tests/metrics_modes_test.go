package tests

// The modes of spoold's node_exporter textfile and of its directory: the
// tree's (0640, 0750) when they are kept under the spool, where only the
// spool's group may read; world-readable out of it (the unit's
// /var/lib/vmspool/metrics), where node_exporter reads without any access
// to the spool. Both whatever the umask.

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestMetricsModes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		out           bool // --metrics-file out of the spool
		file, dirMode os.FileMode
	}{
		{name: "under-spool", file: 0o640, dirMode: 0o750},
		{name: "out-of-spool", out: true, file: 0o644, dirMode: 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newSpool(t)
			prom := filepath.Join(dir, "metrics", "spoold-mm.prom") // the default for --host mm
			args := []string{"--spool", dir, "--host", "mm", "--metrics-every", "100ms"}
			if tc.out {
				prom = filepath.Join(t.TempDir(), "metrics", "spoold.prom")
				args = append(args, "--metrics-file", prom)
			}
			// A strict umask: the modes must not come from it.
			cmd := exec.Command("sh", append([]string{"-c", `umask 077; exec "$@"`, "sh", bin("spoold")}, args...)...)
			cmd.Env = raceEnv()
			log, err := os.CreateTemp(t.TempDir(), "spoold-*.log")
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
				}
				if t.Failed() {
					b, _ := os.ReadFile(log.Name())
					t.Logf("spoold log:\n%s", lastLines(b, 30))
				}
			})

			s := openSpool(t, dir, 300)
			eventually(t, 10*time.Second, 20*time.Millisecond, "the spool's directories", func() bool {
				_, err := os.Stat(filepath.Join(dir, spool.GateDir))
				return err == nil
			})
			job := opsSubmit(t, dir, "mm", "true")
			waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond)
			eventually(t, 10*time.Second, 20*time.Millisecond, "the textfile", func() bool {
				_, err := os.Stat(prom)
				return err == nil
			})
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				stopped = true
				if err != nil {
					t.Fatalf("spoold exited with %v after SIGTERM; want 0", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("spoold did not exit within 20s of SIGTERM")
			}

			// After the last write, at the stop.
			for _, c := range []struct {
				path string
				want os.FileMode
			}{{prom, tc.file}, {filepath.Dir(prom), tc.dirMode}} {
				fi, err := os.Stat(c.path)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != c.want {
					t.Errorf("%s: mode %#o, want %#o", c.path, got, c.want)
				}
			}
		})
	}
}
