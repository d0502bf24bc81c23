package tests

// The second review's attacks on how spoold runs a job (issue items 1, 5
// and 7 of docs/reliability.md's "Attacks"): a script job's environment
// choosing what an allowed git command runs, a job's output amplified
// into the progress every chat's watchers read, and a writer that
// outlives its job. Each is made as it was found, against the real
// binaries.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// attackGitRepo makes a git repository with one commit and one tracked
// file changed since, so that `git status` reads its index and `git diff`
// has something to show.
func attackGitRepo(t *testing.T, dir string) {
	t.Helper()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "f"), []byte("one\n"), 0o644)
	git("add", "f")
	git("commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "f"), []byte("two\n"), 0o644)
}

// 1 (second review). A script job's env still chose what the gate's
// verdict meant: the spec's PATH picked which git an allowed `git status`
// ran, GIT_CONFIG_COUNT/KEY/VALUE, GIT_CONFIG_PARAMETERS, HOME's
// .gitconfig, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL and GIT_DIR gave git a
// core.fsmonitor (a program `git status` runs), and GIT_EXTERNAL_DIFF a
// program `git diff` runs. A script job's env is an allowlist now: each
// runs the real git, on the repository of its cwd, with spoold's own
// settings, and says which names it left out.
func TestAttackScriptEnvGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git (make test-deps installs it)")
	}
	dir := newSpool(t)
	tmp := t.TempDir()
	ran := filepath.Join(tmp, "ran")
	repo := filepath.Join(tmp, "repo")
	attackGitRepo(t, repo)
	prog := func(name string) string {
		p := filepath.Join(tmp, "prog-"+name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch "+ran+"-"+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fake := filepath.Join(tmp, "bin")
	os.MkdirAll(fake, 0o755)
	os.WriteFile(filepath.Join(fake, "git"), []byte("#!/bin/sh\ntouch "+ran+"-path\n"), 0o755)
	fsmonitor := func(name string) string { return "[core]\n\tfsmonitor = " + prog(name) + "\n" }
	home := filepath.Join(tmp, "home")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(fsmonitor("home")), 0o644)
	xdg := filepath.Join(tmp, "xdg")
	os.MkdirAll(filepath.Join(xdg, "git"), 0o755)
	os.WriteFile(filepath.Join(xdg, "git", "config"), []byte(fsmonitor("xdg")), 0o644)
	global := filepath.Join(tmp, "global.gitconfig")
	os.WriteFile(global, []byte(fsmonitor("global")), 0o644)
	evil := filepath.Join(tmp, "evil")
	attackGitRepo(t, evil)
	f, _ := os.OpenFile(filepath.Join(evil, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(fsmonitor("gitdir"))
	f.Close()

	envs := map[string][]string{
		"path":         {"PATH=" + fake + ":/usr/bin:/bin"},
		"config-count": {"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=" + prog("count")},
		"config-param": {"GIT_CONFIG_PARAMETERS='core.fsmonitor'='" + prog("param") + "'"},
		"home":         {"HOME=" + home},
		"xdg":          {"XDG_CONFIG_HOME=" + xdg},
		"global":       {"GIT_CONFIG_GLOBAL=" + global},
		"git-dir":      {"GIT_DIR=" + filepath.Join(evil, ".git"), "GIT_WORK_TREE=" + repo},
		"ext-diff":     {"GIT_EXTERNAL_DIFF=" + prog("extdiff")},
	}
	script := filepath.Join(tmp, "job.sh")
	os.WriteFile(script, []byte("git status --short\ngit diff\necho the-script-ran\n"), 0o644)
	if out, err := exec.Command(bin("vmgate"), "check", script).CombinedOutput(); err != nil {
		t.Fatalf("the gate refuses the script itself: %v: %s", err, out)
	}
	jobs := map[string]string{}
	for name, kv := range envs {
		args := []string{"--chat", "git-" + name, "--cwd", repo, "--env", "VMSPOOL_TASK=kept"}
		for _, e := range kv {
			args = append(args, "--env", e)
		}
		jobs[name] = spooldSubmit(t, dir, append(args, "--script", script)...)
	}
	spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	for name, job := range jobs {
		r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond)
		log, _ := os.ReadFile(filepath.Join(dir, job+".log"))
		if r.State != spool.Done || !strings.Contains(string(log), "the-script-ran") || !strings.Contains(string(log), "M f") {
			t.Errorf("%s: ended %s (%s), log %q; want done, the real git on the cwd's repository", name, r.State, relStr(r.Error), log)
		}
		first, _, _ := strings.Cut(envs[name][0], "=")
		if !spooldHasEvent(spooldEvents(t, s, job), spool.EventWorker, first) {
			t.Errorf("%s: no event says that %s was left out of the script's environment", name, first)
		}
		if spooldHasEvent(spooldEvents(t, s, job), spool.EventWorker, "VMSPOOL_TASK") {
			t.Errorf("%s: VMSPOOL_TASK, which the allowlist keeps, was said to be left out", name)
		}
	}
	if m, _ := filepath.Glob(ran + "*"); len(m) > 0 {
		t.Fatalf("a spec's env made an allowed git command run a program the gate never saw: %v", m)
	}
}

// attackIO reads what a live process has written (wchar of /proc/<pid>/io:
// the bytes it passed to write(2) and its kin) and its CPU time.
func attackIO(t *testing.T, pid int) (written int64, cpu time.Duration) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			written, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's name, which may hold spaces.
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	return written, time.Duration(ut+stt) * time.Second / 100 // USER_HZ
}

// 5 (second review). Progress amplification: a job writing 100 plain
// lines a second of 8 KiB of \x01 (within every limit) kept a progress
// document of 3.1 MB, each byte escaped six-fold by JSON and the whole
// document rewritten every 20 ms: spoold wrote 1,991 MiB in 20 s, and a
// watcher burned a core reading it. The document is bounded once
// encoded, and what spoold writes of a chat's progress is bounded a
// second, whatever the job prints.
func TestAttackProgressAmplification(t *testing.T) {
	dir := newSpool(t)
	const seconds = 8 // of flooding, longer than the window below
	job := spooldSubmit(t, dir, "--chat", "amp", "--", "sh", "-c", fmt.Sprintf(`
head -c 8192 /dev/zero | tr '\0' '\001' > "$SPOOL_DIR/$SPOOL_JOB.line"; echo >> "$SPOOL_DIR/$SPOOL_JOB.line"
spool say flooding
for s in $(seq %d); do
  for i in $(seq 100); do cat "$SPOOL_DIR/$SPOOL_JOB.line"; done >> "$SPOOL_EVENTS"
  sleep 1
done
rm "$SPOOL_DIR/$SPOOL_JOB.line"
spool say done-flooding`, seconds))
	p := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	eventually(t, 30*time.Second, 5*time.Millisecond, "the job to start", func() bool {
		pr, err := s.ReadProgress("amp")
		return err == nil && pr.Job == job
	})
	follow := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "amp", "--job", job, "--timeout", "60s")
	follow.Env = raceEnv()
	var fout bytes.Buffer
	follow.Stdout, follow.Stderr = &fout, &fout
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	// spoold's writes are measured while the job runs: a reaped child's
	// writes are added to its parent's, and the job's own appends would
	// count as spoold's once it ends.
	const window = 5 * time.Second
	w0, _ := attackIO(t, p.cmd.Process.Pid)
	began := time.Now()
	var wrote int64 = -1
	var largest int64
	var followCPU time.Duration
	for {
		if fi, err := os.Stat(filepath.Join(dir, "progress", "amp")); err == nil {
			largest = max(largest, fi.Size())
		}
		if _, c := attackIO(t, follow.Process.Pid); c > 0 {
			followCPU = c
		}
		if wrote < 0 && time.Since(began) >= window {
			w1, _ := attackIO(t, p.cmd.Process.Pid)
			wrote = w1 - w0
			if st, _ := s.State(job); st.Final() {
				t.Fatal("the flooding job ended before the window did")
			}
		}
		if st, _ := s.State(job); st.Final() {
			break
		}
		if time.Since(began) > 60*time.Second {
			t.Fatal("the flooding job did not end")
		}
		time.Sleep(20 * time.Millisecond) // the pace of the samples
	}
	wall := time.Since(began)
	follow.Wait()
	t.Logf("in %v: spoold wrote %.1f MiB; over %v the largest document seen was %d bytes, and watchd follow used %v of CPU",
		window, float64(wrote)/(1<<20), wall.Round(time.Millisecond), largest, followCPU)
	if r := waitEnd(t, s, job, 10*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("the job ended %s: %s", r.State, relStr(r.Error))
	}
	if largest > spool.MaxProgressSize {
		t.Errorf("progress/amp reached %d bytes; the bound is %d", largest, spool.MaxProgressSize)
	}
	// The bound is a chat's progress rate (1 MiB a second) and one
	// document's worth of burst; twice that and 4 MiB more is generous
	// for spoold's other writes (its events, lease, result, log lines).
	if limit := 2*int64(window/time.Second)<<20 + 4<<20; wrote > limit {
		t.Errorf("spoold wrote %d bytes in %v for one chat; want at most %d", wrote, window, limit)
	}
	// A watcher that reads each document whole as it comes, under the
	// race detector, uses a core; a quarter of one leaves room for a busy
	// machine (an eighth was passed at load 17 on 2 cores).
	if followCPU > wall/4 {
		t.Errorf("watchd follow used %v of CPU in %v following one chat", followCPU, wall)
	}
	if !strings.Contains(fout.String(), "done-flooding") {
		t.Errorf("the watcher did not see the run to its end:\n%.2000s", fout.String())
	}
}

// attackProcs returns the pids of the processes whose command line holds
// mark.
func attackProcs(mark string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(mark)) {
			out = append(out, pid)
		}
	}
	return out
}

// 7 (second review). A log limit that ended with the run: a writer that
// left the job's session and group (setsid) and closed fds 3 and 4 kept
// writing to the job's log after the job had ended, past its limit (286
// MiB against 64 MiB), and ran on. Everything a job started ends with it
// now, whether spoold has a cgroup for the job or not, and whoever
// writes the log is held to its limit.
func TestAttackLogOutlivesRun(t *testing.T) {
	for _, mode := range []string{"auto", "off"} {
		t.Run("cgroup "+mode, func(t *testing.T) {
			dir := newSpool(t)
			mark := fmt.Sprintf("escapee-%d-%s", os.Getpid(), mode)
			t.Cleanup(func() {
				for _, pid := range attackProcs(mark) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			// The escapee writes 256 KiB every 20 ms to the stdout it
			// inherited, the job's log, from a session of its own,
			// without the descriptors that mark a job's processes.
			job := spooldSubmit(t, dir, "--chat", "escape", "--", "sh", "-c", `
setsid sh -c 'exec 3>&- 4>&-; while :; do head -c 262144 /dev/zero | tr "\0" x; echo; sleep 0.02; done' `+mark+` &
sleep 0.5; echo main-done`)
			args := []string{"--max-log", "1MiB", "--kill-grace", "1s"}
			if mode == "off" {
				args = append(args, "--cgroup", "off")
			}
			p := spooldStart(t, dir, args...)
			s := openSpool(t, dir, 200)
			r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond)
			if r.State != spool.Done {
				t.Errorf("the job ended %s: %s", r.State, relStr(r.Error))
			}
			logName := filepath.Join(dir, job+".log")
			fi, err := os.Stat(logName)
			if err != nil {
				t.Fatal(err)
			}
			atEnd := fi.Size()
			// The point of the wait: what happens to the log after the end.
			time.Sleep(2 * time.Second)
			fi, _ = os.Stat(logName)
			t.Logf("the log: %d bytes at the end, %d two seconds later (limit 1 MiB); spoold said: %s", atEnd, fi.Size(),
				firstMatch(p.logText(), "jobs are ended"))
			if fi.Size() != atEnd {
				t.Errorf("the log grew from %d to %d bytes after the job ended", atEnd, fi.Size())
			}
			if fi.Size() > 2<<20 {
				t.Errorf("the log is %d bytes; its limit is 1 MiB", fi.Size())
			}
			if left := attackProcs(mark); len(left) > 0 {
				t.Errorf("the job's escapee still runs after the job's end: pids %v", left)
			}
		})
	}
}

// The same escapee, left by a spoold killed with -9: it is ended before
// the job's next attempt runs, with a cgroup by recovery (the job's cgroup
// is not empty though no process holds the spec's lock), without one by
// its own next write (nothing reads its output pipe any more).
func TestAttackEscapeeAfterKill9(t *testing.T) {
	for _, mode := range []string{"auto", "off"} {
		t.Run("cgroup "+mode, func(t *testing.T) {
			dir := newSpool(t)
			mark := fmt.Sprintf("escapee9-%d-%s", os.Getpid(), mode)
			t.Cleanup(func() {
				for _, pid := range attackProcs(mark) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			started := filepath.Join(t.TempDir(), "started")
			job := spooldSubmit(t, dir, "--chat", "escape9", "--attempts", "2", "--", "sh", "-c", `
if [ "$SPOOL_ATTEMPT" = 1 ]; then
  setsid sh -c 'exec 3>&- 4>&-; while :; do echo still here; sleep 0.02; done' `+mark+` &
  touch "$0"; sleep 60
fi
echo "attempt $SPOOL_ATTEMPT"`, started)
			var args []string
			if mode == "off" {
				args = []string{"--cgroup", "off"}
			}
			p := spooldStart(t, dir, append(args, "--lease", "2s")...)
			eventually(t, 30*time.Second, 10*time.Millisecond, "the escapee", func() bool {
				_, err := os.Stat(started)
				return err == nil && len(attackProcs(mark)) > 0
			})
			p.kill()
			spooldStart(t, dir, append(args, "--lease", "2s")...)
			s := openSpool(t, dir, 200)
			if r := waitEnd(t, s, job, 60*time.Second, 20*time.Millisecond); r.State != spool.Done || r.Attempt != 2 {
				t.Errorf("the job ended %s at attempt %d: %s", r.State, r.Attempt, relStr(r.Error))
			}
			if left := attackProcs(mark); len(left) > 0 {
				t.Errorf("the first attempt's escapee still runs after the second attempt's end: pids %v", left)
			}
		})
	}
}

// firstMatch is the first line of text that holds s.
func firstMatch(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
