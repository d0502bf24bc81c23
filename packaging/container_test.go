package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A container of this machine's own Debian release, booted by
// systemd-nspawn with systemd as its pid 1, for the package's units to run
// under a real systemd: pid 1 of the machines this project is built on is
// not systemd.
//
// Its root file system is made once by debootstrap (a minimal base with
// systemd) and cached; each test boots an overlay of it, so that what the
// test installs goes away with the test. The container has its own
// network (loopback only: the daemons' fixed ports do not meet other
// tests'), and runs in a cgroup of its own, made for it and removed after.

// rootfsKey names the cached root file system: change it when what
// debootstrap is asked for changes, and the next run builds a new one.
const rootfsKey = "minbase-systemd-1"

type container struct {
	root   string // the overlay the container runs on, as this host sees it
	leader int    // its pid 1, as this host sees it
}

// cacheDir is where the root file system is kept between runs:
// $VMSPOOL_CACHE, else the user's cache directory (~/.cache/vmspool).
func cacheDir(t *testing.T) string {
	if d := os.Getenv("VMSPOOL_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory for the container's root file system (set VMSPOOL_CACHE): %v", err)
	}
	return filepath.Join(d, "vmspool")
}

// osRelease reads a field of /etc/os-release.
func osRelease(key string) string {
	b, _ := os.ReadFile("/etc/os-release")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// rootfs returns the cached root file system, made first if missing.
// Making it takes debootstrap and the Debian archive: without them the
// test skips, saying what failed.
func rootfs(t *testing.T) string {
	if osRelease("ID") != "debian" || osRelease("VERSION_CODENAME") == "" {
		t.Skipf("the container is a Debian of this machine's release, and this machine is %s %s",
			osRelease("ID"), osRelease("VERSION_CODENAME"))
	}
	suite := osRelease("VERSION_CODENAME")
	dir := filepath.Join(cacheDir(t), "nspawn-"+suite+"-"+rootfsKey)
	if _, err := os.Stat(filepath.Join(dir, "usr", "lib", "systemd", "systemd")); err == nil {
		return dir
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skipf("no container root file system in %s, and no debootstrap to make one (apt-get install debootstrap; make test-deps does)", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Skipf("cannot make the cache directory: %v", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".rootfs-")
	if err != nil {
		t.Skipf("cannot make the cache directory: %v", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	// debootstrap's own mirror: the Debian archive this machine's apt uses.
	out, err := exec.CommandContext(ctx, "debootstrap", "--variant=minbase",
		"--include=systemd,systemd-sysv,dbus", suite, tmp).CombinedOutput()
	if err != nil {
		t.Skipf("debootstrap of %s failed, so no container can boot (is the Debian archive reachable?): %v\n%s",
			suite, err, tail(out, 20))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil { // not another run's, made meanwhile
			t.Skipf("cannot keep the root file system in %s: %v", dir, err)
		}
	}
	t.Logf("debootstrap made the container's root file system in %s (%s), cached in %s",
		time.Since(start).Round(time.Second), suite, dir)
	return dir
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cgroupProcs makes a cgroup for the container in each hierarchy a
// systemd needs (the unified one; under the hybrid layout also
// name=systemd), and returns their cgroup.procs files. Without one, nspawn
// and the container's systemd would put their cgroups at the top of this
// host's hierarchies, beside everything else's.
func cgroupProcs(t *testing.T, name string) []string {
	var roots []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup"}
	} else {
		for _, d := range []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"} {
			if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
				roots = append(roots, d)
			}
		}
	}
	if len(roots) == 0 {
		t.Skip("no cgroup hierarchy that systemd can run in (/sys/fs/cgroup has neither cgroup2 nor name=systemd)")
	}
	var procs []string
	for _, r := range roots {
		d := filepath.Join(r, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("cannot make a cgroup for the container: %v", err)
		}
		t.Cleanup(func() { removeCgroup(d) })
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs
}

// removeCgroup removes a cgroup and those beneath it, deepest first, once
// they are empty.
func removeCgroup(dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50 && os.Remove(dirs[i]) != nil; try++ {
			time.Sleep(100 * time.Millisecond) // the last processes still leaving
		}
	}
}

// boot starts the container on an overlay of root, with the directory pkg
// bound read-only at /pkg, and waits until its systemd says it is up.
func boot(t *testing.T, root, pkg string) *container {
	tmp := t.TempDir()
	c := &container{root: filepath.Join(tmp, "root")}
	for _, d := range []string{"upper", "work", "root"} {
		os.Mkdir(filepath.Join(tmp, d), 0o755)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", root, filepath.Join(tmp, "upper"), filepath.Join(tmp, "work"))
	if err := syscall.Mount("overlay", c.root, "overlay", 0, opts); err != nil {
		t.Skipf("cannot mount an overlay over the container's root file system: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(c.root, 0); err != nil {
			syscall.Unmount(c.root, syscall.MNT_DETACH)
		}
	})

	name := fmt.Sprintf("vmspool-test-%d", os.Getpid())
	procs := cgroupProcs(t, name)
	var console bytes.Buffer
	cmd := exec.Command("sh", "-c", `for p in $CGROUP_PROCS; do echo $$ > "$p" || exit 1; done; exec "$@"`, "sh",
		"systemd-nspawn", "--quiet", "--keep-unit", "--register=no", "--machine="+name,
		"--directory="+c.root, "--private-network", "--bind-ro="+pkg+":/pkg",
		"--console=pipe", "--boot")
	cmd.Env = append(os.Environ(), "CGROUP_PROCS="+strings.Join(procs, " "))
	cmd.Stdout, cmd.Stderr = &console, &console
	if err := cmd.Start(); err != nil {
		t.Skipf("systemd-nspawn: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// SIGTERM: nspawn asks the container's systemd to halt.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Skipf("systemd did not boot in the container: systemd-nspawn exited (%v); its output:\n%s", err, tail(console.Bytes(), 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Skipf("systemd did not come up in the container within 90s; its console:\n%s", tail(console.Bytes(), 30))
		}
		if c.leader == 0 {
			c.leader = containerInit(cmd.Process.Pid)
		}
		if c.leader != 0 {
			out, _ := c.run("systemctl", "is-system-running")
			if s := strings.TrimSpace(out); s == "running" || s == "degraded" {
				break
			}
		}
		time.Sleep(100 * time.Millisecond) // the poll of the wait
	}
	t.Logf("the container's systemd was up in %s", time.Since(start).Round(time.Millisecond))
	return c
}

// containerInit finds, among the descendants of pid, the process that is
// pid 1 of its own pid namespace.
func containerInit(pid int) int {
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p)); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(status))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == "1" {
					return p
				}
			}
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return 0
}

// run runs a command in the container, as root, with a plain environment.
func (c *container) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(c.leader), "--all", "--",
		"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *container) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.run(args...)
	if err != nil {
		t.Fatalf("in the container, %q: %v\n%s", args, err, out)
	}
	return out
}

// asVmspool runs a command in the container as the service user, as
// cron and Open WebUI do.
func (c *container) asVmspool(t *testing.T, args ...string) string {
	t.Helper()
	return c.must(t, append([]string{"setpriv", "--reuid=vmspool", "--regid=vmspool", "--init-groups",
		"env", "-i", "PATH=/usr/bin:/bin", "HOME=/var/spool/vm", "SPOOL_DIR=/var/spool/vm"}, args...)...)
}

// show reads a unit's properties.
func (c *container) show(t *testing.T, unit string, props ...string) map[string]string {
	t.Helper()
	out := c.must(t, "systemctl", "show", unit, "--property="+strings.Join(props, ","))
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// host is where this host sees a path of the container.
func (c *container) host(p string) string { return filepath.Join(c.root, p) }

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond) // the poll of the wait
	}
}
