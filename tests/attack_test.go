package tests

// The attacks of a review done as an attacker would (a local user, a job's
// own script, a crafted document, a web page the operator visits), each
// reproduced against the real binaries the way it was found, and each now
// refused, bounded or harmless. docs/reliability.md lists them with their
// outcome. Those that need another user to exist (a file owned by someone
// else) need root, and say so when they skip.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// attackNobody is the uid of "another local user" in these tests.
const attackNobody = 65534

func attackNeedRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attack needs a file owned by another user (CI runs as root)")
	}
}

// attackVictim makes a file outside the spool with mode 0600 and known
// content, and returns a check that it is unchanged.
func attackVictim(t *testing.T) (string, func()) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o600)
	return p, func() {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("victim: %v", err)
		}
		b, _ := os.ReadFile(p)
		if fi.Mode().Perm() != 0o600 || string(b) != "secret\n" {
			t.Errorf("the file outside the spool was changed: mode %v, content %q", fi.Mode().Perm(), b)
		}
	}
}

// 1. A symlinked metrics/ made spoold write outside the spool. It is
// refused, said once in the log, and nothing is written there.
func TestAttackMetricsSymlinkDir(t *testing.T) {
	dir := newSpool(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "metrics")); err != nil {
		t.Fatal(err)
	}
	p := spooldStart(t, dir, "--metrics-every", "100ms")
	eventually(t, 20*time.Second, 20*time.Millisecond, "spoold to refuse the symlinked metrics directory", func() bool {
		return strings.Contains(p.logText(), "refusing to write through it")
	})
	time.Sleep(300 * time.Millisecond) // a few more writes' worth
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("spoold wrote outside the spool through metrics/: %v", ents)
	}
	if n := strings.Count(p.logText(), "cannot write the metrics textfile"); n != 1 {
		t.Errorf("the refusal was logged %d times; want once", n)
	}
}

// 2. A root spoold ran any spec, whoever owned it. It now refuses a spool
// another user owns or may write, and moves aside a job another user
// queued, running nothing of it.
func TestAttackRootSpooldOwnership(t *testing.T) {
	attackNeedRoot(t)
	for _, c := range []struct {
		name, want string
		prep       func(dir string) error
	}{
		{"writable by others", "lets group or others write", func(dir string) error { return os.Chmod(dir, 0o777) }},
		{"writable by group", "lets group or others write", func(dir string) error { return os.Chmod(dir, 0o770) }},
		{"owned by another user", "owned by uid 65534", func(dir string) error { return os.Chown(dir, attackNobody, attackNobody) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newSpool(t)
			if err := c.prep(dir); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin("spoold"), "--spool", dir).CombinedOutput()
			if code := exitCode(err); code != 1 || !strings.Contains(string(out), c.want) {
				t.Fatalf("spoold exited %d: %s; want 1 and %q", code, out, c.want)
			}
		})
	}

	t.Run("a job queued by another user", func(t *testing.T) {
		dir := newSpool(t)
		ran := filepath.Join(t.TempDir(), "ran")
		for _, who := range []string{"spec", "marker"} {
			id := "evil-" + who
			spooldHandSubmit(t, dir, id, "c-"+who, fmt.Sprintf(`{"chat":"c-%s","argv":["touch",%q]}`, who, ran))
			name := id + ".json"
			if who == "marker" {
				name = id + ".ready"
			}
			if err := os.Lchown(filepath.Join(dir, name), attackNobody, attackNobody); err != nil {
				t.Fatal(err)
			}
		}
		good := spooldSubmit(t, dir, "--chat", "fine", "--", "true")
		spooldStart(t, dir)
		s := openSpool(t, dir, 200)
		if r := waitEnd(t, s, good, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Fatalf("the good job ended %s", r.State)
		}
		for _, who := range []string{"spec", "marker"} {
			id := "evil-" + who
			eventually(t, 20*time.Second, 20*time.Millisecond, id+" moved to corrupt/", func() bool {
				_, err1 := os.Stat(filepath.Join(dir, "corrupt", id+".ready.why"))
				_, err2 := os.Stat(filepath.Join(dir, "corrupt", id+".json"))
				return err1 == nil && err2 == nil
			})
			why, _ := os.ReadFile(filepath.Join(dir, "corrupt", id+".ready.why"))
			if !strings.Contains(string(why), "untrusted") {
				t.Errorf("%s: corrupt/%s.ready.why says %q", id, id, why)
			}
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("a job queued by another user ran as root")
		}
	})
}

// 3. vmgate serve followed a symlink at gate/in: it chmodded the target
// 0770 and moved its files away. A symlink in place of any gate directory
// is now refused at start, and one swapped in later is never followed.
func TestAttackGateDirSymlink(t *testing.T) {
	for _, sub := range []string{"in", "out", "done", "corrupt"} {
		t.Run(sub, func(t *testing.T) {
			dir := newSpool(t)
			outside := t.TempDir()
			os.Chmod(outside, 0o700)
			if err := os.WriteFile(filepath.Join(outside, "x.sh"), []byte("echo hi\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "gate"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "gate", sub)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin("vmgate"), "serve", "--spool", dir)
			cmd.Env = raceEnv()
			out, err := cmd.CombinedOutput()
			if exitCode(err) == 0 || !strings.Contains(string(out), "symlink is refused") {
				t.Errorf("vmgate serve with a symlinked gate/%s: exit %d: %s", sub, exitCode(err), out)
			}
			attackSameDir(t, outside)
		})
	}

	t.Run("swapped in while serving", func(t *testing.T) {
		dir := newSpool(t)
		outside := t.TempDir()
		os.Chmod(outside, 0o700)
		p := relStart(t, "vmgate", "serve", "--spool", dir, "--rescan", "100ms")
		gate := filepath.Join(dir, "gate")
		eventually(t, 20*time.Second, 20*time.Millisecond, "gate/in", func() bool {
			_, err := os.Stat(filepath.Join(gate, "done"))
			return err == nil
		})
		// The first request proves the server is up; then in/ is swapped for
		// a link to a directory with a request of its own.
		if err := os.WriteFile(filepath.Join(gate, "in", "first.sh"), []byte("echo first\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, 20*time.Millisecond, "the first verdict", func() bool {
			_, err := os.Stat(filepath.Join(gate, "out", "first.json"))
			return err == nil
		})
		if err := os.WriteFile(filepath.Join(outside, "x.sh"), []byte("echo hi\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(gate, "in"), filepath.Join(gate, "in.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(gate, "in")); err != nil {
			t.Fatal(err)
		}
		// A request in the directory still held proves a rescan went by.
		if err := os.WriteFile(filepath.Join(gate, "in.old", "second.sh"), []byte("echo second\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, 20*time.Millisecond, "the second verdict", func() bool {
			_, err := os.Stat(filepath.Join(gate, "out", "second.json"))
			return err == nil
		})
		time.Sleep(300 * time.Millisecond) // three rescans more
		attackSameDir(t, outside)
		if _, err := os.Stat(filepath.Join(gate, "out", "x.json")); err == nil {
			t.Error("a request outside the spool was decided")
		}
		_ = p
	})
}

// attackSameDir checks that dir (made 0700 with x.sh) is as it was.
func attackSameDir(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory outside the spool is now %v", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "x.sh" {
		t.Errorf("the directory outside the spool now holds %v", ents)
	}
}

// 4. watchd serve --addr-file wrote a fixed .<name>.tmp: a link planted
// there made it overwrite any file.
func TestAttackAddrFileLink(t *testing.T) {
	dir := newSpool(t)
	victim, check := attackVictim(t)
	adir := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(adir, ".addr.tmp")); err != nil {
		t.Fatal(err)
	}
	relStart(t, "watchd", "serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(adir, "addr"))
	eventually(t, 20*time.Second, 20*time.Millisecond, "the address file", func() bool {
		b, err := os.ReadFile(filepath.Join(adir, "addr"))
		return err == nil && strings.Contains(string(b), "127.0.0.1:")
	})
	check()
}

// 5. A script job's env walked around the gate: BASH_ENV ran a refused
// `git init`, and so could an exported function, xtrace's PS4 and a PATH
// that chose which "bash" ran the script. None of them runs code now.
func TestAttackScriptEnv(t *testing.T) {
	dir := newSpool(t)
	tmp := t.TempDir()
	ran := filepath.Join(tmp, "ran")
	evil := filepath.Join(tmp, "evil.sh")
	if err := os.WriteFile(evil, []byte("touch "+ran+"-bashenv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(tmp, "bin")
	os.MkdirAll(fake, 0o755)
	if err := os.WriteFile(filepath.Join(fake, "bash"), []byte("#!/bin/sh\ntouch "+ran+"-path\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(tmp, "job.sh")
	os.WriteFile(script, []byte("echo hello\n"), 0o644)
	envs := map[string][]string{
		"bashenv":  {"BASH_ENV=" + evil},
		"env":      {"ENV=" + evil},
		"function": {"BASH_FUNC_echo%%=() { touch " + ran + "-function; }"},
		"ps4":      {"SHELLOPTS=xtrace", "PS4=$(touch " + ran + "-ps4)"},
		"path":     {"PATH=" + fake + ":/usr/bin:/bin"},
	}
	var jobs []string
	for name, kv := range envs {
		args := []string{"--chat", "env-" + name}
		for _, e := range kv {
			args = append(args, "--env", e)
		}
		jobs = append(jobs, spooldSubmit(t, dir, append(args, "--script", script)...))
	}
	spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	for _, job := range jobs {
		r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond)
		if r.State != spool.Done {
			t.Errorf("%s ended %s: %v", job, r.State, r.Error)
		}
		if log, _ := os.ReadFile(filepath.Join(dir, job+".log")); !strings.Contains(string(log), "hello") {
			t.Errorf("%s: the script did not run as written: log %q", job, log)
		}
	}
	if m, _ := filepath.Glob(ran + "*"); len(m) > 0 {
		t.Fatalf("a spec's env ran code the gate never saw: %v", m)
	}
}

// 6. A deeply nested script (300 KB of parentheses) overflowed the
// parser's stack: spoold died on every attempt and vmgate serve
// crash-looped. Both refuse it now as undecidable and go on.
func TestAttackDeepScript(t *testing.T) {
	dir := newSpool(t)
	deep := filepath.Join(t.TempDir(), "deep.sh")
	src := strings.Repeat("(", 150_000) + "true" + strings.Repeat(")", 150_000)
	if err := os.WriteFile(deep, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := spooldSubmit(t, dir, "--chat", "deep", "--attempts", "3", "--script", deep)
	good := spooldSubmit(t, dir, "--chat", "other", "--", "true")
	p := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	r := waitEnd(t, s, bad, 30*time.Second, 20*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "nests more than") {
		t.Errorf("the deep script ended %s: %v", r.State, r.Error)
	}
	if r := waitEnd(t, s, good, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("the other chat's job ended %s", r.State)
	}
	select {
	case <-p.done:
		t.Fatalf("spoold died: %v", p.err)
	default:
	}

	// vmgate serve: the request is decided (refused) and the daemon lives.
	g := relStart(t, "vmgate", "serve", "--spool", dir)
	in := filepath.Join(dir, "gate", "in")
	eventually(t, 20*time.Second, 20*time.Millisecond, "gate/in", func() bool { _, err := os.Stat(in); return err == nil })
	// A request is written atomically, as docs/gate.md asks of its writers.
	if err := os.WriteFile(filepath.Join(in, ".deep.tmp"), []byte(src), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(in, ".deep.tmp"), filepath.Join(in, "deep.sh")); err != nil {
		t.Fatal(err)
	}
	var verdict []byte
	eventually(t, 20*time.Second, 20*time.Millisecond, "the verdict", func() bool {
		verdict, _ = os.ReadFile(filepath.Join(dir, "gate", "out", "deep.json"))
		return len(verdict) > 0
	})
	if !strings.Contains(string(verdict), `"allowed":false`) || !strings.Contains(string(verdict), `"undecidable"`) {
		t.Errorf("verdict: %s", verdict)
	}
	select {
	case <-g.done:
		t.Fatalf("vmgate serve died: %v", g.err)
	default:
	}
}

// 7. A FIFO at chats/<chat>/lock hung spoold's claims and its shutdown,
// and spool gc. The chat's job is refused with the reason; the others run,
// the daemon stops on SIGTERM, and gc returns.
func TestAttackLockFIFO(t *testing.T) {
	dir := newSpool(t)
	if err := os.MkdirAll(filepath.Join(dir, "chats", "fifo"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "chats", "fifo", "lock"), 0o640); err != nil {
		t.Fatal(err)
	}
	bad := spooldSubmit(t, dir, "--chat", "fifo", "--", "true")
	good := spooldSubmit(t, dir, "--chat", "other", "--", "true")
	p := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	if r := waitEnd(t, s, good, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("the other chat's job ended %s", r.State)
	}
	r := waitEnd(t, s, bad, 30*time.Second, 20*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "FIFO") {
		t.Errorf("the job of the chat with a FIFO lock ended %s: %v", r.State, r.Error)
	}
	p.stop(t, 15*time.Second)
	gc := exec.Command(bin("spool"), "--spool", dir, "gc", "--older", "0s")
	gc.Env = raceEnv()
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = gc.CombinedOutput()
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		gc.Process.Kill()
		t.Fatal("spool gc hung on the FIFO")
	}
	_ = out
}

// 8. A job appending 200 MB of empty lines to its events took spoold past
// 3.7 GB; spool show read it whole too. Events are folded as they stream
// now: memory stays flat whatever the file's size.
func TestAttackEventsFlood(t *testing.T) {
	dir := newSpool(t)
	const mb = 5
	job := spooldSubmit(t, dir, "--chat", "flood", "--", "sh", "-c",
		fmt.Sprintf(`head -c %d /dev/zero | tr '\0' '\n' >> "$SPOOL_EVENTS"; sleep 1.2; spool say "after the flood"`, mb<<20))
	p := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	r := waitEnd(t, s, job, 120*time.Second, 50*time.Millisecond)
	if r.State != spool.Done {
		t.Fatalf("the flooding job ended %s: %v", r.State, r.Error)
	}
	if hwm := attackPeakMB(t, p.cmd.Process.Pid); hwm > 400 {
		t.Errorf("spoold's peak memory was %.0f MB reading %d MB of events", hwm, mb)
	}
	pr := spooldFinalProgress(t, s, "flood")
	// Past the event rate the flood is not relayed, and a note says so
	// (the events file keeps it all: spool show below reads it).
	if !spooldHasEvent(pr.Events, spool.EventWorker, "events dropped") || len(pr.Events) > spool.MaxProgressEvents {
		t.Errorf("the progress after the flood: status %q, %d events: %+v", pr.Status, len(pr.Events), pr.Events)
	}
	// spool show's peak is read from /proc while it runs: a child's
	// rusage would count the test's own memory, which the child shares
	// until its exec.
	show := exec.Command(bin("spool"), "--spool", dir, "show", job)
	show.Env = raceEnv()
	var out strings.Builder
	show.Stdout, show.Stderr = &out, &out
	if err := show.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- show.Wait() }()
	peak := 0.0
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil || !strings.Contains(out.String(), "after the flood") {
				t.Errorf("spool show: %v: %.300s", err, out.String())
			}
			waiting = false
		case <-time.After(5 * time.Millisecond):
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", show.Process.Pid)); err == nil {
				var kb float64
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
						fmt.Sscan(f[1], &kb)
					}
				}
				peak = max(peak, kb/1024)
			}
		}
	}
	if peak > 400 {
		t.Errorf("spool show's peak memory was %.0f MB", peak)
	}
	t.Logf("peak memory reading %d MB of events: spoold %.0f MB, spool show %.0f MB", mb, attackPeakMB(t, p.cmd.Process.Pid), peak)
}

// attackPeakMB reads a live process's peak resident memory (VmHWM).
func attackPeakMB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kb float64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			fmt.Sscan(f[1], &kb)
		}
	}
	return kb / 1024
}

// 9. 64 events with a 250,000-character id of "<" (six bytes each once
// JSON escaped them as \u003c) made progress/<chat> 93 MB: the chat
// vanished from the list and watchd follow waited out its timeout. Every
// field is clipped now, and "<" is written as one byte.
func TestAttackHugeEventFields(t *testing.T) {
	dir := newSpool(t)
	job := spooldSubmit(t, dir, "--chat", "huge", "--", "sh", "-c",
		`id=$(head -c 250000 /dev/zero | tr '\0' '<')
for i in $(seq 64); do printf '{"type":"status","text":"<b>","id":"%s","options":["<%s>"]}\n' "$id" "$i" >> "$SPOOL_EVENTS"; done
spool say done-saying`)
	spooldStart(t, dir)
	follow := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "huge", "--job", job, "--timeout", "60s")
	follow.Env = raceEnv()
	out, err := follow.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "done-saying") {
		t.Fatalf("watchd follow: %v: %.500s", err, out)
	}
	fi, err := os.Stat(filepath.Join(dir, "progress", "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Errorf("progress/huge is %d bytes", fi.Size())
	}
	b, _ := os.ReadFile(filepath.Join(dir, "progress", "huge"))
	if strings.Contains(string(b), `\u003c`) {
		t.Error(`progress/huge escapes "<" as \u003c`)
	}
}

// 10. A crafted progress document of 380,000 one-character events (15.8
// MB, under the limit) cost 360 MB per subscriber. Parsing keeps the
// newest 64 events only, so ten subscribers cost little.
func TestAttackCraftedProgress(t *testing.T) {
	dir := newSpool(t)
	os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
	var b strings.Builder
	fmt.Fprintf(&b, `{"job":"J","chat":"crafted","seq":380000,"updated":%d,"started":1,"done":false,"state":"running","status":"x","events":[`, time.Now().Unix())
	for i := 0; i < 380_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"seq":%d,"type":"status","text":"x"}`, i+1)
	}
	b.WriteString(`]}`)
	if b.Len() > spool.MaxProgress {
		t.Fatalf("the crafted document is %d bytes, over the limit", b.Len())
	}
	if err := os.WriteFile(filepath.Join(dir, "progress", "crafted"), []byte(b.String()), 0o640); err != nil {
		t.Fatal(err)
	}
	p, addr := abuseServe(t, dir)
	var conns []net.Conn
	for i := 0; i < 10; i++ {
		// ?job=J: the document counts whatever its stamp, as the page asks.
		c := attackStream(t, addr, "/chats/crafted/events?job=J")
		conns = append(conns, c)
	}
	// Measured once all ten streams are served (each has read the
	// document).
	eventually(t, 20*time.Second, 20*time.Millisecond, "ten subscribers", func() bool {
		_, body := opsGet(t, "http://"+addr+"/metrics")
		return opsMetric(body, "vmspool_watchd_subscribers") >= 10
	})
	if rss := abuseRSS(t, p.cmd.Process.Pid); rss > 400 {
		t.Errorf("watchd holds %.0f MB with 10 subscribers of the crafted document", rss)
	}
	for _, c := range conns {
		c.Close()
	}
}

// attackStream opens an event stream and reads the head of its answer,
// leaving the connection open.
func attackStream(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path, authHeader(addr))
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "200") {
		c.Close()
		t.Fatalf("stream %s: %v %q", path, err, buf[:n])
	}
	return c
}

// 11. watchd serve answered any Host header: a page the operator visits
// could read every chat by DNS rebinding. Only loopback names, IP
// addresses and the names of --allow-host are answered.
func TestAttackHostHeader(t *testing.T) {
	dir := newSpool(t)
	_, addr := abuseServe(t, dir, "--allow-host", "watch.example.org")
	_, port, _ := strings.Cut(addr, ":")
	for _, c := range []struct {
		host string
		want int
	}{
		{"rebind.attacker.example:" + port, 421},
		{"attacker.example", 421},
		{"localhost.attacker.example:" + port, 421},
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"[::1]:" + port, 200},
		{"watch.example.org", 200},
		{"WATCH.example.org.:443", 200},
	} {
		for _, path := range []string{"/chats", "/metrics", "/"} {
			code, body := abuseRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: "+c.host+"\r\nConnection: close\r\n\r\n")
			if code != c.want {
				t.Errorf("Host %q GET %s: %d %.100q; want %d", c.host, path, code, body, c.want)
			}
		}
	}
}
