package tests

// vmgate's stories with the real binary: check and run as the agent's
// tool calls them (txtar scripts in testdata/vmgate, run by testscript),
// and serve as a daemon in its own process, stopped by SIGTERM.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/vmgate"
)

// vmgateSubmit writes a request as the agent's side must: a dot-named
// temporary renamed into gate/in/.
func vmgateSubmit(t *testing.T, gate, id, script string) {
	t.Helper()
	tmp := filepath.Join(gate, "in", "."+id)
	if err := os.WriteFile(tmp, []byte(script), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(gate, "in", id+".sh")); err != nil {
		t.Fatal(err)
	}
}

func vmgateWait(t *testing.T, path string) []byte {
	t.Helper()
	var data []byte
	eventually(t, 20*time.Second, 10*time.Millisecond, path+" to appear", func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil
	})
	return data
}

func vmgateServe(t *testing.T, spoolDir string, args ...string) *proc {
	t.Helper()
	p := startProc(t, raceEnv(), "vmgate", append([]string{"serve", "--spool", spoolDir}, args...)...)
	// Ready once the gate's directories exist and the first scan is done;
	// a request written before then is found by that scan anyway.
	eventually(t, 20*time.Second, 10*time.Millisecond, "vmgate serve to make gate/in/", func() bool {
		_, err := os.Stat(filepath.Join(spoolDir, "gate", "in"))
		return err == nil
	})
	return p
}

func TestVmgateServe(t *testing.T) {
	s := newSpool(t)
	gate := filepath.Join(s, "gate")
	fed := filepath.Join(t.TempDir(), "fed")
	p := vmgateServe(t, s, "--machine", "tee -a "+fed+" | sh -s")

	vmgateSubmit(t, gate, "allowed-1", "echo from the machine; git status --short >/dev/null 2>&1; exit 5\n")
	vmgateSubmit(t, gate, "refused-1", "cd /mnt/project && git add -A && git status --short\n")
	if err := os.WriteFile(filepath.Join(gate, "in", "has space.sh"), []byte("ls"), 0o640); err != nil {
		t.Fatal(err)
	}

	var ok, bad struct {
		ID      string  `json:"id"`
		Allowed bool    `json:"allowed"`
		Git     *string `json:"git"`
		Reason  *string `json:"reason"`
		Message string  `json:"message"`
		Run     bool    `json:"run"`
	}
	if err := json.Unmarshal(vmgateWait(t, filepath.Join(gate, "out", "allowed-1.json")), &ok); err != nil {
		t.Fatal(err)
	}
	if !ok.Allowed || ok.Git != nil || ok.Reason != nil || !ok.Run {
		t.Errorf("allowed-1 = %+v", ok)
	}
	var exit struct {
		Exit  *int   `json:"exit"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(vmgateWait(t, filepath.Join(gate, "out", "allowed-1.exit")), &exit); err != nil {
		t.Fatal(err)
	}
	if exit.Exit == nil || *exit.Exit != 5 {
		t.Errorf("allowed-1 exit = %+v", exit)
	}
	if out, _ := os.ReadFile(filepath.Join(gate, "out", "allowed-1.log")); !strings.Contains(string(out), "from the machine") {
		t.Errorf("allowed-1 log = %q", out)
	}
	if err := json.Unmarshal(vmgateWait(t, filepath.Join(gate, "out", "refused-1.json")), &bad); err != nil {
		t.Fatal(err)
	}
	if bad.Allowed || bad.Git == nil || *bad.Git != "add" || *bad.Reason != "git-write" || !strings.Contains(bad.Message, "git_commit") {
		t.Errorf("refused-1 = %+v", bad)
	}
	vmgateWait(t, filepath.Join(gate, "corrupt", "has space.sh.why"))
	// The request is in done/ once its handling is over: a run would
	// have begun by then with out/<id>.owner, written before the machine
	// is started.
	vmgateWait(t, filepath.Join(gate, "done", "refused-1.sh"))
	if _, err := os.Stat(filepath.Join(gate, "out", "refused-1.owner")); err == nil {
		t.Error("the refused script was started on the machine (it has an owner file)")
	}
	if data, _ := os.ReadFile(fed); strings.Contains(string(data), "git add") {
		t.Errorf("the machine was fed the refused script: %q", data)
	}
	if _, err := os.Stat(filepath.Join(gate, "out", "refused-1.exit")); err == nil {
		t.Error("the refused script has an exit file")
	}

	// SIGTERM: a clean exit, 0.
	p.stop(t, 20*time.Second)
	// One log line a decision, with its fields.
	logText := p.logText()
	var decisions int
	for _, line := range strings.Split(string(logText), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "verdict" {
			continue
		}
		decisions++
		for _, k := range []string{"id", "allowed", "reason", "git"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("log line lacks %q: %s", k, line)
			}
		}
	}
	if decisions != 2 {
		t.Errorf("%d verdict log lines, want 2:\n%s", decisions, logText)
	}

	// A restarted daemon does not decide again what was decided.
	before, _ := os.ReadFile(filepath.Join(gate, "out", "refused-1.json"))
	p2 := vmgateServe(t, s)
	vmgateSubmit(t, gate, "after-restart", "git log --oneline -1\n")
	vmgateWait(t, filepath.Join(gate, "out", "after-restart.json"))
	after, _ := os.ReadFile(filepath.Join(gate, "out", "refused-1.json"))
	if string(before) != string(after) {
		t.Error("the restarted daemon rewrote an old verdict")
	}
	p2.cmd.Process.Signal(syscall.SIGINT)
	<-p2.done
	if p2.err != nil {
		t.Errorf("vmgate serve after SIGINT: %v", p2.err)
	}
}

// The JSON of check is the same document the package returns.
func TestVmgateCheckJSONMatchesPackage(t *testing.T) {
	for _, script := range []string{"git log --oneline -1", "/usr/bin/git push origin main", `eval "$X"`, "echo 'x"} {
		out, _ := exec.Command(bin("vmgate"), "check", "--json", "-c", script).Output()
		var got vmgate.Verdict
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("check --json -c %q: %v (%q)", script, err, out)
		}
		want := vmgate.Check(script)
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("check --json -c %q:\n%s\nwant\n%s", script, a, b)
		}
	}
}

// gateHostile are scripts that cost the gate the most memory, each
// refused: 1 MiB of ! in a test (836 MB of stack for one decision before
// the scan counted it), the densest trees the scan lets through, walked
// whole to a git write at their end, and values that double until the
// walk's memory budget runs out.
func gateHostile() []string {
	const mib = 1 << 20
	double := "a=" + strings.Repeat("x", 32768) + "\nb=$a$a\n"
	var vars strings.Builder
	for i := range 19000 {
		fmt.Fprintf(&vars, "v%d=$b\n", i)
	}
	return []string{
		"[[ " + strings.Repeat("! ", (mib-10)/2) + "a ]]",
		"[[ " + strings.Repeat("a && ", (mib-10)/5) + "a ]]",
		strings.Repeat("a|", vmgate.MaxNodes/2-8) + "a\ngit push\n",
		strings.Repeat("a&&", vmgate.MaxNodes/3-8) + "a\ngit push\n",
		"echo " + strings.Repeat("$a ", vmgate.MaxNodes/2-8) + "\ngit push\n",
		double + vars.String(),
		double + "echo " + strings.Repeat("$b$b$b$b ", 2000) + "\n",
		"[[ " + strings.Repeat("! ", (mib-10)/2) + "a ]]",
	}
}

// Hardening, second round, item 8: the gate's memory. `!` and `&&` were not
// counted by the size limits: 1 MiB of `[[ ! ! ... a ]]` cost 836 MB a
// decision, and spoold deciding eight at once reached 4.3 GB. Now every
// node is counted before the parse, the walk has a memory budget, and the
// decisions of a process reserve what they may take from one pool
// (docs/gate.md, "Limits"): spoold with eight workers, handed eight
// hostile scripts at once, and vmgate serve, handed them in turn, refuse
// each and stay within a few hundred MB.
func TestVmgateHostileMemory(t *testing.T) {
	scripts := gateHostile()
	dir := newSpool(t)
	work := t.TempDir()
	var jobs []string
	for i, src := range scripts {
		f := filepath.Join(work, fmt.Sprintf("hostile%d.sh", i))
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, spooldSubmit(t, dir, "--chat", fmt.Sprintf("hostile%d", i), "--script", f))
	}
	good := spooldSubmit(t, dir, "--chat", "other", "--", "true")
	p := spooldStart(t, dir, "--workers", "8")
	s := openSpool(t, dir, 200)
	for _, job := range jobs {
		r := waitEnd(t, s, job, 120*time.Second, 50*time.Millisecond)
		if r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "vmgate refused") {
			t.Errorf("hostile job %s ended %s: %s", job, r.State, errText(r.Error))
		}
	}
	if r := waitEnd(t, s, good, 60*time.Second, 50*time.Millisecond); r.State != spool.Done {
		t.Errorf("the other chat's job ended %s", r.State)
	}
	spooldPeak := attackPeakMB(t, p.cmd.Process.Pid)

	g := vmgateServe(t, dir)
	for i, src := range scripts {
		vmgateSubmit(t, filepath.Join(dir, "gate"), fmt.Sprintf("hostile%d", i), src)
	}
	for i := range scripts {
		var v struct {
			Allowed bool    `json:"allowed"`
			Reason  *string `json:"reason"`
		}
		if err := json.Unmarshal(vmgateWait(t, filepath.Join(dir, "gate", "out", fmt.Sprintf("hostile%d.json", i))), &v); err != nil || v.Allowed {
			t.Errorf("vmgate serve, hostile%d: %+v %v", i, v, err)
		}
	}
	servePeak := attackPeakMB(t, g.cmd.Process.Pid)
	// The bounds are generous (the race detector's own memory included):
	// the point is the order of magnitude, gigabytes before.
	if spooldPeak > 1024 || servePeak > 1024 {
		t.Errorf("peak memory: spoold %.0f MB, vmgate serve %.0f MB", spooldPeak, servePeak)
	}
	t.Logf("peak memory deciding %d hostile scripts: spoold (8 workers) %.0f MB, vmgate serve %.0f MB", len(scripts), spooldPeak, servePeak)
}

func errText(e *string) string {
	if e == nil {
		return "no error"
	}
	return *e
}

// vmgate serve as root runs, with --machine, whatever gate/in/ holds: a
// spool another user owns, may write, or may swap from above had root run
// that user's script (the daemon started and served it). It is refused as
// spoold refuses it, with the reason and exit 1; a sticky parent such as
// /tmp is fine (TestVmgateServe).
func TestAttackGateServeUnsafeSpool(t *testing.T) {
	attackNeedRoot(t)
	for _, c := range []struct {
		name, want string
		prep       func(parent, dir string) error
	}{
		{"writable by others", "lets group or others write", func(_, dir string) error { return os.Chmod(dir, 0o777) }},
		{"writable by group", "lets group or others write", func(_, dir string) error { return os.Chmod(dir, 0o770) }},
		{"owned by another user", "owned by uid 65534", func(_, dir string) error { return os.Chown(dir, attackNobody, attackNobody) }},
		{"parent another user's", "owned by uid 65534", func(parent, _ string) error { return os.Chown(parent, attackNobody, attackNobody) }},
		{"parent writable by its group", "writable by group or others", func(parent, _ string) error { return os.Chmod(parent, 0o775) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, dir := spoolUnder(t, c.prep)
			cmd := exec.Command(bin("vmgate"), "serve", "--spool", dir, "--machine", "sh -s")
			cmd.Env = raceEnv()
			code, out := exitsAtStart(t, cmd, 20*time.Second, "a root vmgate serve served an unsafe spool")
			if code != 1 || !strings.Contains(out, c.want) {
				t.Fatalf("vmgate serve exited %d: %s; want 1 and %q", code, out, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "gate", "in")); err == nil {
				t.Error("the refused daemon made gate/in/ first")
			}
		})
	}
}
