package tests

// The second review's attacks on how spoold runs a job (issue items 1, 5
// and 7 of docs/reliability.md's "Attacks"): a script job's environment
// choosing what an allowed git command runs, a job's output amplified
// into the progress every chat's watchers read, and a writer that
// outlives its job. Each is made as it was found, against the real
// binaries.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
