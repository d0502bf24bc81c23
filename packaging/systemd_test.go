package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemd installs the package in a container booted with systemd
// (container_test.go) and runs the units as an operator would: start
// reaches READY through sd_notify, the watchdog keeps a live spoold and
// restarts a stuck one, `systemctl kill -s KILL spoold` is followed by a
// restart that recovers the running job, `systemctl stop` waits out the
// grace, an upgrade restarts spoold without losing the running job, and
// remove and purge stop the daemons and leave the spool.
//
// It needs the package ($VMSPOOL_DEB, which make deb-test sets), root,
// systemd-nspawn and a root file system for the container (made once by
// debootstrap, then cached); without any of them it skips, saying which.
func TestSystemd(t *testing.T) {
	deb := os.Getenv("VMSPOOL_DEB")
	if deb == "" {
		t.Skip("no package: make deb-test builds it and sets VMSPOOL_DEB")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to boot a container with systemd-nspawn")
	}
	for _, tool := range []string{"systemd-nspawn", "nsenter", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (apt-get install systemd-container; make test-deps does)", tool)
		}
	}
	pkg := t.TempDir()
	version := upgradeOf(t, deb, pkg)
	c := boot(t, rootfs(t), pkg)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.run("journalctl", "--no-pager", "-o", "short-precise", "-n", "80", "-u", "spoold", "-u", "watchd")
			t.Logf("the container's journal of spoold and watchd:\n%s", out)
		}
	})

	steps := []struct {
		name string
		step func(*testing.T, *container)
	}{
		{"Install", systemdInstall},
		{"StartReady", systemdStartReady},
		{"JobCgroup", systemdJobCgroup},
		{"Watchdog", systemdWatchdog},
		{"KillRecovers", systemdKillRecovers},
		{"StopGrace", systemdStopGrace},
		{"Upgrade", func(t *testing.T, c *container) { systemdUpgrade(t, c, version) }},
		{"RemovePurge", systemdRemovePurge},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.step(t, c) }) {
			return // each step starts where the one before left the container
		}
	}
}

// upgradeOf puts the package in dir as vmspool.deb, and beside it the
// same package with a later version, vmspool-up.deb, for the upgrade; it
// returns the later version.
func upgradeOf(t *testing.T, deb, dir string) string {
	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmspool.deb"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "pkg")
	if out, err := exec.Command("dpkg-deb", "-R", deb, tree).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v\n%s", err, out)
	}
	control := filepath.Join(tree, "DEBIAN", "control")
	cb, err := os.ReadFile(control)
	if err != nil {
		t.Fatal(err)
	}
	var version string
	var lines []string
	for _, l := range strings.Split(string(cb), "\n") {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			version = v + "+up1"
			l = "Version: " + version
		}
		lines = append(lines, l)
	}
	os.WriteFile(control, []byte(strings.Join(lines, "\n")), 0o644)
	// gzip -1: dpkg-deb's default, xz, takes 18 s here.
	if out, err := exec.Command("dpkg-deb", "-Zgzip", "-z1", "-b", tree, filepath.Join(dir, "vmspool-up.deb")).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v\n%s", err, out)
	}
	return version
}

// systemdInstall: the package installs, creates the user and the spool,
// and enables and starts nothing.
func systemdInstall(t *testing.T, c *container) {
	out := c.must(t, "dpkg", "-i", "/pkg/vmspool.deb")
	if !strings.Contains(out, "no daemon was started") {
		t.Errorf("the install does not say how to start the daemons:\n%s", out)
	}
	for _, unit := range []string{"spoold", "watchd", "vmgate"} {
		if st, _ := c.run("systemctl", "is-enabled", unit); strings.TrimSpace(st) != "disabled" {
			t.Errorf("%s is %q after the install, want disabled: nothing is enabled unasked", unit, st)
		}
		if st, _ := c.run("systemctl", "is-active", unit); strings.TrimSpace(st) != "inactive" {
			t.Errorf("%s is %q after the install, want inactive", unit, st)
		}
	}
	for _, dir := range []string{"/var/spool/vm", "/var/log/vmspool"} {
		if got := strings.TrimSpace(c.must(t, "stat", "-c", "%a %U %G", dir)); got != "750 vmspool vmspool" {
			t.Errorf("%s is %q, want 750 vmspool vmspool (sysusers.d, tmpfiles.d)", dir, got)
		}
	}
	// The unit's watchdog is 30 s, and spoold pings at half of whatever
	// systemd asks (WATCHDOG_USEC): 3 s tests the same thing ten times
	// sooner.
	c.must(t, "sh", "-c", `mkdir -p /run/systemd/system/spoold.service.d &&
		printf '[Service]\nWatchdogSec=3s\n' > /run/systemd/system/spoold.service.d/test.conf &&
		systemctl daemon-reload`)
}

// systemdStartReady: systemctl start returns once the daemons said
// READY=1 (Type=notify: before it a unit is "activating").
func systemdStartReady(t *testing.T, c *container) {
	c.must(t, "systemctl", "start", "spoold", "watchd")
	for _, unit := range []string{"spoold", "watchd"} {
		p := c.show(t, unit, "Type", "ActiveState", "SubState", "NotifyAccess", "NRestarts")
		if p["Type"] != "notify" || p["ActiveState"] != "active" || p["SubState"] != "running" ||
			p["NotifyAccess"] != "main" || p["NRestarts"] != "0" {
			t.Errorf("%s after start: %v", unit, p)
		}
	}
	// watchd answers on its loopback address as soon as it is ready: the
	// chats with the token it made in the spool, and to nobody without it
	// (the page itself holds no chat's words, and answers anyone).
	get := func(auth string) string {
		return c.must(t, "bash", "-c", `tok=$(cat /var/spool/vm/watchd/token) && exec 3<>/dev/tcp/127.0.0.1/8377 &&
		printf 'GET /chats HTTP/1.0\r\nHost: 127.0.0.1\r\n`+auth+`\r\n' "$tok" >&3 && head -n 1 <&3`)
	}
	if page := get(`Authorization: Bearer %s\r\n`); !strings.Contains(page, " 200 ") {
		t.Errorf("watchd's chats with the token: %q", page)
	}
	if page := get(`X-Token-Not-Sent: %.0s\r\n`); !strings.Contains(page, " 401 ") {
		t.Errorf("watchd's chats without the token: %q", page)
	}
	if modes := c.must(t, "stat", "-c", "%a %U %G", "/var/spool/vm/watchd/token", "/var/spool/vm/watchd/serve.sock"); strings.TrimSpace(modes) != "640 vmspool vmspool\n660 vmspool vmspool" {
		t.Errorf("watchd's token and socket: %q; want 640 and 660, vmspool vmspool", modes)
	}
}

// systemdJobCgroup: under the packaged unit, spoold makes each job a
// cgroup of its own in the unit's delegated subtree (not the fallback of
// process groups), and removes it when the job ends.
func systemdJobCgroup(t *testing.T, c *container) {
	if j := c.must(t, "journalctl", "--no-pager", "-u", "spoold"); strings.Contains(j, "no cgroup for jobs") {
		t.Fatalf("spoold under the unit runs jobs without a cgroup:\n%s", tail([]byte(j), 20))
	}
	job := strings.TrimSpace(c.asVmspool(t, "spool", "submit", "--chat", "cgroup", "--", "cat", "/proc/self/cgroup"))
	waitResult(t, c, job, "done", 30*time.Second)
	log, _ := os.ReadFile(c.host("/var/spool/vm/" + job + ".log"))
	want := "/system.slice/spoold.service/vmspool-"
	if !strings.Contains(string(log), want) || !strings.HasSuffix(strings.TrimSpace(string(log)), "-"+job) {
		t.Fatalf("the job's cgroup: %q; want one of its own under %s...-%s", log, want, job)
	}
	cg := "/sys/fs/cgroup" + strings.TrimPrefix(strings.TrimSpace(string(log)), "0::")
	waitFor(t, 10*time.Second, "the ended job's cgroup removed", func() bool {
		_, err := c.run("test", "-e", cg)
		return err != nil
	})
}

// systemdWatchdog: spoold's pings keep it running past its watchdog
// time, and a spoold that stops pinging is killed and started again.
func systemdWatchdog(t *testing.T, c *container) {
	first := c.show(t, "spoold", "MainPID", "WatchdogUSec", "WatchdogTimestampMonotonic")
	if first["WatchdogUSec"] != "3s" {
		t.Fatalf("spoold's watchdog: %v", first)
	}
	start := time.Now()
	pings, last := 0, first["WatchdogTimestampMonotonic"]
	waitFor(t, 20*time.Second, "three watchdog pings from spoold", func() bool {
		if ts := c.show(t, "spoold", "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]; ts != last {
			pings, last = pings+1, ts
		}
		return pings >= 3 && time.Since(start) > 3*time.Second
	})
	if p := c.show(t, "spoold", "MainPID", "NRestarts", "ActiveState"); p["MainPID"] != first["MainPID"] ||
		p["NRestarts"] != "0" || p["ActiveState"] != "active" {
		t.Fatalf("spoold past its watchdog time, pinging: %v, was %v", p, first)
	}

	c.must(t, "systemctl", "kill", "--signal=STOP", "spoold")
	waitFor(t, 30*time.Second, "a stopped spoold restarted by the watchdog", func() bool {
		p := c.show(t, "spoold", "MainPID", "NRestarts", "ActiveState")
		return p["NRestarts"] == "1" && p["MainPID"] != first["MainPID"] && p["ActiveState"] == "active"
	})
	if j := c.must(t, "journalctl", "--no-pager", "-u", "spoold"); !strings.Contains(j, "Failed with result 'watchdog'") {
		t.Errorf("the journal does not say the watchdog killed spoold:\n%s", tail([]byte(j), 20))
	}
}

// systemdKillRecovers: a SIGKILL to the unit (spoold and its job) is
// followed by a restart, and the new spoold runs the job again.
func systemdKillRecovers(t *testing.T, c *container) {
	before := c.show(t, "spoold", "MainPID", "NRestarts")
	job := strings.TrimSpace(c.asVmspool(t, "spool", "submit", "--chat", "kill", "--attempts", "2", "--",
		"sh", "-c", `spool say "attempt $SPOOL_ATTEMPT"; sleep 2; echo finished`))
	waitForEvent(t, c, job, "attempt 1")
	c.must(t, "systemctl", "kill", "--signal=KILL", "spoold")
	waitFor(t, 30*time.Second, "spoold restarted after its SIGKILL", func() bool {
		p := c.show(t, "spoold", "MainPID", "NRestarts", "ActiveState")
		return p["NRestarts"] != before["NRestarts"] && p["MainPID"] != before["MainPID"] && p["ActiveState"] == "active"
	})
	r := waitResult(t, c, job, "done", 60*time.Second)
	if r.Attempt != 2 {
		t.Errorf("the killed job ended at attempt %d, want 2 (recovered, then run again)", r.Attempt)
	}
	if log, _ := os.ReadFile(c.host("/var/spool/vm/" + job + ".log")); !strings.Contains(string(log), "finished") {
		t.Errorf("the recovered run's log: %q", log)
	}
}

// systemdStopGrace: systemctl stop returns once spoold has given its
// running job the grace (10 s) and queued it again.
func systemdStopGrace(t *testing.T, c *container) {
	job := strings.TrimSpace(c.asVmspool(t, "spool", "submit", "--chat", "stop", "--attempts", "2", "--",
		"sh", "-c", `spool say started; sleep 120`))
	waitForEvent(t, c, job, "started")
	start := time.Now()
	c.must(t, "systemctl", "stop", "spoold")
	took := time.Since(start)
	if took < 10*time.Second || took > 45*time.Second {
		t.Errorf("systemctl stop took %s: want the grace (10 s) and less than TimeoutStopSec (45 s)", took)
	}
	if _, err := os.Stat(c.host("/var/spool/vm/" + job + ".ready")); err != nil {
		t.Errorf("the job still running at the end of the grace is not queued again: %v", err)
	}
	if _, err := os.Stat(c.host("/var/spool/vm/" + job + ".running")); err == nil {
		t.Errorf("the job is still claimed after the stop")
	}
	t.Logf("systemctl stop took %s", took.Round(time.Millisecond))
	// Its second attempt would hold spoold's only worker for two minutes.
	c.asVmspool(t, "spool", "cancel", job)
	c.must(t, "systemctl", "enable", "--now", "spoold")
	waitResult(t, c, job, "cancelled", 30*time.Second)
}

// systemdUpgrade: installing a later version restarts spoold, whose
// running job finishes within the grace; an enabled unit stays enabled.
func systemdUpgrade(t *testing.T, c *container, version string) {
	before := c.show(t, "spoold", "MainPID")
	job := strings.TrimSpace(c.asVmspool(t, "spool", "submit", "--chat", "upgrade", "--",
		"sh", "-c", `spool say started; sleep 3; echo finished`))
	waitForEvent(t, c, job, "started")
	c.must(t, "dpkg", "-i", "/pkg/vmspool-up.deb")
	if v := c.must(t, "dpkg-query", "-W", "-f=${Version}", "vmspool"); v != version {
		t.Errorf("installed version %q, want %q", v, version)
	}
	r := waitResult(t, c, job, "done", 30*time.Second)
	if r.Attempt != 1 {
		t.Errorf("the job running during the upgrade ended at attempt %d: want 1, finished within the grace", r.Attempt)
	}
	p := c.show(t, "spoold", "MainPID", "ActiveState", "UnitFileState")
	if p["MainPID"] == before["MainPID"] || p["ActiveState"] != "active" {
		t.Errorf("spoold after the upgrade: %v (was %v): want restarted", p, before)
	}
	if p["UnitFileState"] != "enabled" {
		t.Errorf("spoold is %q after the upgrade, was enabled", p["UnitFileState"])
	}
	if st, _ := c.run("systemctl", "is-enabled", "vmgate"); strings.TrimSpace(st) != "disabled" {
		t.Errorf("vmgate is %q after the upgrade: an upgrade enables nothing", st)
	}
}

// systemdRemovePurge: remove stops the daemons and leaves the spool;
// purge leaves it too, and says where it is.
func systemdRemovePurge(t *testing.T, c *container) {
	c.must(t, "dpkg", "-r", "vmspool")
	for _, unit := range []string{"spoold", "watchd"} {
		if st, _ := c.run("systemctl", "is-active", unit); strings.TrimSpace(st) == "active" {
			t.Errorf("%s still active after remove", unit)
		}
	}
	if ps, _ := c.run("sh", "-c", `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = spoold ] && echo "${p#/proc/}"; done; true`); strings.TrimSpace(ps) != "" {
		t.Errorf("spoold runs after remove: pid %s", ps)
	}
	jobs, _ := filepath.Glob(c.host("/var/spool/vm/*.done"))
	if len(jobs) < 2 {
		t.Errorf("after remove the spool holds %d ended jobs, want the 2 done", len(jobs))
	}
	out := c.must(t, "dpkg", "-P", "vmspool")
	if !strings.Contains(out, "the spool /var/spool/vm") {
		t.Errorf("purge does not say where the spool is:\n%s", out)
	}
	if after, _ := filepath.Glob(c.host("/var/spool/vm/*.done")); len(after) != len(jobs) {
		t.Errorf("purge changed the spool: %d ended jobs, were %d", len(after), len(jobs))
	}
	if got := strings.TrimSpace(c.must(t, "stat", "-c", "%a %U %G", "/var/spool/vm")); got != "750 vmspool vmspool" {
		t.Errorf("after purge the spool is %q", got)
	}
}

// waitForEvent waits until the job's events hold text: the job runs.
func waitForEvent(t *testing.T, c *container, job, text string) {
	t.Helper()
	waitFor(t, 30*time.Second, "job "+job+" says "+text, func() bool {
		b, _ := os.ReadFile(c.host("/var/spool/vm/" + job + ".events"))
		return strings.Contains(string(b), text)
	})
}

type result struct {
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
}

// waitResult waits for the job's result document <job>.<state>.
func waitResult(t *testing.T, c *container, job, state string, within time.Duration) result {
	t.Helper()
	var r result
	waitFor(t, within, "job "+job+" "+state, func() bool {
		b, err := os.ReadFile(c.host("/var/spool/vm/" + job + "." + state))
		return err == nil && json.Unmarshal(b, &r) == nil
	})
	return r
}
