package tests

// vmgate's stories with the real binary: check and run as the agent's
// tool calls them (txtar scripts in testdata/vmgate, run by testscript),
// and serve as a daemon in its own process, stopped by SIGTERM.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil {
			return data
		}
	}
	t.Fatalf("%s never appeared", path)
	return nil
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
	vmgateWait(t, filepath.Join(gate, "done", "refused-1.sh"))
	time.Sleep(100 * time.Millisecond)
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
