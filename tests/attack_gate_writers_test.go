package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Third round: a reader of the spool ran code through the gate. The
// operator adds whoever should read the spool to its group; gate/in/ was
// 0770 and that group's, so a member wrote gate/in/r1.sh and `vmgate
// serve --machine 'bash -s'` ran it as the service user. Now in/ is 0750
// (only a --writers-group of its own may write there), and a request is
// read only when its owner is the gate's own user, root, or a member of
// that group: one left by anyone else, as by a reader while in/ was still
// 0770, is moved to corrupt/ with the reason, logged once, and never run.
func TestAttackGateReaderRuns(t *testing.T) {
	attackNeedRoot(t)
	const reader = 12345 // in the spool's group (gid 12345): may read it
	dir := newSpool(t)
	attackOpenParents(t, dir)
	gate := filepath.Join(dir, "gate")
	// The tree as the service user's daemons leave it (here the service
	// user is root), with in/ as it was: 0770 and the spool's group.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o750}, {gate, 0o750}, {filepath.Join(gate, "in"), 0o770}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d.path, 0, reader); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	marks := t.TempDir()
	// write is the reader writing a request as the agent's side would: a
	// dot-named temporary renamed into in/.
	write := func(id string) error {
		script := "touch " + filepath.Join(marks, id) + "\n"
		cmd := exec.Command("/bin/sh", "-c", `printf '%s' "$1" > "$2/.$3" && mv "$2/.$3" "$2/$3.sh"`, "sh", script, filepath.Join(gate, "in"), id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: reader, Gid: reader}}
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	// Before the daemon starts, in/ is still 0770: the reader's request
	// lands there.
	if err := write("early"); err != nil {
		t.Fatalf("the reader could not write into the old 0770 in/: %v", err)
	}
	p := relStart(t, "vmgate", "serve", "--spool", dir, "--machine", "bash -s")
	eventually(t, 20*time.Second, 10*time.Millisecond, "vmgate serving", func() bool {
		return strings.Contains(p.logText(), "vmgate serving")
	})
	// Once it serves, the reader cannot write in/ at all; had it, the
	// request's end is awaited as the early one's.
	lateWritten := write("late") == nil
	if lateWritten {
		t.Error("a member of the spool's group wrote into gate/in/ of a serving gate")
	}
	// The service user's own request runs: the gate still works.
	vmgateSubmit(t, gate, "own", "touch "+filepath.Join(marks, "own")+"\n")
	vmgateWait(t, filepath.Join(gate, "out", "own.exit"))
	if _, err := os.Stat(filepath.Join(marks, "own")); err != nil {
		t.Errorf("the service user's own request did not run: %v", err)
	}
	ids := []string{"early"}
	if lateWritten {
		ids = append(ids, "late")
	}
	for _, id := range ids {
		// Handled either way: moved aside, or decided (and run).
		eventually(t, 20*time.Second, 10*time.Millisecond, id+" handled", func() bool {
			_, err1 := os.Stat(filepath.Join(gate, "corrupt", id+".sh.why"))
			_, err2 := os.Stat(filepath.Join(gate, "out", id+".json"))
			return err1 == nil || err2 == nil
		})
		if _, err := os.Stat(filepath.Join(gate, "out", id+".json")); err == nil {
			// A run has started by the time its verdict is there; wait
			// for its end so the marker's absence means something.
			vmgateWait(t, filepath.Join(gate, "out", id+".exit"))
			t.Errorf("the reader's request %s was decided", id)
		}
		if _, err := os.Stat(filepath.Join(marks, id)); err == nil {
			t.Errorf("the reader's request %s ran as the service user", id)
		}
		why, _ := os.ReadFile(filepath.Join(gate, "corrupt", id+".sh.why"))
		if !strings.Contains(string(why), "untrusted") || !strings.Contains(string(why), "uid 12345") {
			t.Errorf("corrupt/%s.sh.why = %q; want the untrusted owner named", id, why)
		}
	}
	if fi, err := os.Stat(filepath.Join(gate, "in")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("gate/in/ is %v (%v); want 0750", fi.Mode().Perm(), err)
	}
	if n := strings.Count(p.logText(), "request moved to corrupt/"); n != 1 {
		t.Errorf("the refusal was logged %d times; want once:\n%s", n, p.logText())
	}
}
