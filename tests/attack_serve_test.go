package tests

// The attacks of the second review on what shows a run to people: the
// hints that tell a person which command answers a question, the Open
// WebUI tool's script, watchd serve's memory and who may read it. Each is
// reproduced against the real binaries as it was found, and is now
// refused, bounded or harmless (docs/reliability.md, "Attacks", "Second
// review").

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Second review, 2. A question id went unquoted into the "answer with
// this line" hints: a job that appended a question with the id
// `x $(touch P) #` made every hint a command that ran touch when pasted.
// A question id is now an id (the spool's rule): the crafted question is
// read as a status that asks nothing, `spool answer --question` refuses
// it, and nothing downstream ever sees the id.
func TestAttackQuestionIDHint(t *testing.T) {
	dir := newSpool(t)
	pasted := filepath.Join(t.TempDir(), "pasted")
	evil := "x $(touch " + pasted + ") #"
	line, _ := json.Marshal(map[string]any{"type": "question", "id": evil, "text": "Ship it?", "options": []string{"yes", "no"}})
	job := spooldSubmit(t, dir, "--chat", "evil", "--", "sh", "-c",
		`printf '%s\n' "$0" >> "$SPOOL_EVENTS"; spool say asked; sleep 60`, string(line))
	spooldStart(t, dir)
	doc := filepath.Join(dir, "progress", "evil")
	var raw []byte
	eventually(t, 30*time.Second, 20*time.Millisecond, "the run to say it asked", func() bool {
		raw, _ = os.ReadFile(doc)
		return strings.Contains(string(raw), `"status":"asked"`)
	})
	if strings.Contains(string(raw), evil) {
		t.Errorf("progress/evil carries the crafted question id: %s", raw)
	}

	// The id, given back to spool answer as a hint would, is refused as
	// any invalid id is, before anything is written.
	cmd := exec.Command(bin("spool"), "--spool", dir, "answer", "--chat", "evil", "--question", evil, "yes")
	cmd.Env = raceEnv()
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "invalid id") {
		t.Errorf("spool answer --question %q: exit %d: %s; want 2 and an invalid id", evil, code, out)
	}

	// What a watcher relays of the run: no question, no id.
	follow := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "evil", "--job", job, "--json", "--timeout", "2s")
	follow.Env = raceEnv()
	out, _ = follow.CombinedOutput()
	if strings.Contains(string(out), evil) || strings.Contains(string(out), `"kind":"question"`) {
		t.Errorf("watchd follow relays the crafted question: %s", out)
	}
	if _, err := os.Stat(pasted); err == nil {
		t.Fatal("the crafted question id ran a command")
	}
}
