package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/vmgate"
	"github.com/vmspool/vmspool/vmgate/machine"
)

// newSpool opens the spool whose gate directory is dir (a test's
// t.TempDir()/gate).
func newSpool(t *testing.T, dir string) *spool.Spool {
	t.Helper()
	s, err := spool.Create(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// submit writes a request the way the agent's side must: a dot-temporary
// renamed into in/.
func submit(t *testing.T, dir, id, script string) {
	t.Helper()
	tmp := filepath.Join(dir, InDir, "."+id+".tmp")
	if err := os.WriteFile(tmp, []byte(script), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, InDir, id+".sh")); err != nil {
		t.Fatal(err)
	}
}

func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil {
			return data
		}
		time.Sleep(5 * time.Millisecond) // the poll of the wait
	}
	t.Fatalf("%s never appeared", path)
	return nil
}

type serving struct {
	cancel context.CancelFunc
	done   chan error
}

func startServe(t *testing.T, cfg Config) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lg := logrus.New()
	lg.SetOutput(io.Discard)
	cfg.Log = lg
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	s := &serving{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- Serve(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve never became ready")
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *serving) stop(t *testing.T) {
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
		s.done <- nil
	case <-time.After(15 * time.Second):
		t.Error("Serve did not stop")
	}
}

func TestServeDecidesAndRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	started := filepath.Join(t.TempDir(), "started")
	// The fake machine records every script it is fed, then runs it.
	m := &machine.Machine{Command: "tee -a " + started + " | sh -s"}
	startServe(t, Config{Spool: newSpool(t, dir), Machine: m})

	submit(t, dir, "ok-1", "echo hello from the machine; exit 3\n")
	submit(t, dir, "bad-1", "cd /mnt/project && git add -A && git status --short\n")

	var ok VerdictFile
	if err := json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "ok-1.json")), &ok); err != nil {
		t.Fatal(err)
	}
	if !ok.Allowed || !ok.Run || ok.ID != "ok-1" {
		t.Errorf("ok-1 verdict = %+v", ok)
	}
	var ef ExitFile
	if err := json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "ok-1.exit")), &ef); err != nil {
		t.Fatal(err)
	}
	if ef.Exit == nil || *ef.Exit != 3 || ef.Error != "" {
		t.Errorf("ok-1 exit = %+v", ef)
	}
	if out, _ := os.ReadFile(filepath.Join(dir, OutDir, "ok-1.log")); string(out) != "hello from the machine\n" {
		t.Errorf("ok-1 log = %q", out)
	}

	var bad VerdictFile
	if err := json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "bad-1.json")), &bad); err != nil {
		t.Fatal(err)
	}
	if bad.Allowed || bad.Run || *bad.Git != "add" || *bad.Reason != "git-write" {
		t.Errorf("bad-1 verdict = %+v", bad)
	}
	// The refused script never reached the machine. Its request is in
	// done/ once its handling is over; a run would have begun by then,
	// with out/<id>.owner written before the machine is started.
	waitFile(t, filepath.Join(dir, DoneDir, "bad-1.sh"))
	if _, err := os.Stat(filepath.Join(dir, OutDir, "bad-1.owner")); err == nil {
		t.Error("a refused request was started on the machine (it has an owner file)")
	}
	if _, err := os.Stat(filepath.Join(dir, OutDir, "bad-1.exit")); err == nil {
		t.Error("a refused request has an exit file")
	}
	if fed, err := os.ReadFile(started); err != nil || strings.Contains(string(fed), "git add") || !strings.Contains(string(fed), "hello") {
		t.Errorf("the machine was fed %q (%v), want only the allowed script", fed, err)
	}
	for _, id := range []string{"ok-1", "bad-1"} {
		waitFile(t, filepath.Join(dir, DoneDir, id+".sh"))
		if _, err := os.Stat(filepath.Join(dir, InDir, id+".sh")); err == nil {
			t.Errorf("%s still in in/", id)
		}
	}
	for _, p := range []string{"", InDir, OutDir, DoneDir, CorruptDir} {
		fi, err := os.Stat(filepath.Join(dir, p))
		// in/ too: the spool's group reads it and never writes it.
		want := os.FileMode(0o750)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s/: mode %v, want %v (%v)", p, fi.Mode().Perm(), want, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, OutDir, "ok-1.json")); fi.Mode().Perm() != 0o640 {
		t.Errorf("verdict mode %v, want 0640", fi.Mode().Perm())
	}
}

// A request whose owner the spool does not trust (here every request the
// test writes: only another uid is trusted) is moved aside with the
// reason, never decided and never fed to the machine.
func TestServeUntrustedOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	started := filepath.Join(t.TempDir(), "started")
	sp := newSpool(t, dir)
	sp.TrustOwners(os.Geteuid() + 1)
	startServe(t, Config{Spool: sp, Machine: &machine.Machine{Command: "tee -a " + started + " | sh -s"}})
	submit(t, dir, "r1", "echo ran\n")
	why := waitFile(t, filepath.Join(dir, CorruptDir, "r1.sh.why"))
	if !strings.Contains(string(why), "untrusted") || !strings.Contains(string(why), fmt.Sprintf("uid %d", os.Geteuid())) {
		t.Errorf("why = %q", why)
	}
	for _, p := range []string{filepath.Join(dir, OutDir, "r1.json"), filepath.Join(dir, DoneDir, "r1.sh"), started} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: the untrusted request was decided or run", p)
		}
	}
}

// With a writers group, in/ is that group's and 0770; its members'
// requests are decided. The group of gate/ (the spool's readers) is
// refused as one.
func TestServeWritersGroup(t *testing.T) {
	writers := -1
	if os.Geteuid() == 0 {
		writers = 12347
	} else if gs, _ := os.Getgroups(); len(gs) > 0 {
		for _, g := range gs {
			if g != os.Getegid() && g > 0 {
				writers = g
			}
		}
	}
	if writers < 0 {
		t.Skip("needs root or a group besides the primary one")
	}
	dir := filepath.Join(t.TempDir(), "gate")
	sp := newSpool(t, dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.Chown(dir, 0, 12346) // the readers' group
	}
	fi, _ := os.Stat(dir)
	own := int(fi.Sys().(*syscall.Stat_t).Gid)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := Serve(ctx, Config{Spool: sp, WritersGroup: own, Log: logrus.New()}); err == nil || !strings.Contains(err.Error(), "whose members read the spool") {
		t.Errorf("Serve with gate/'s own group as the writers': %v", err)
	}
	me := uint32(os.Geteuid())
	sp.TrustOwners(int(me) + 1)
	sp.TrustMembers("writers", func(uid uint32) bool { return uid == me })
	startServe(t, Config{Spool: sp, WritersGroup: writers})
	fi, err := os.Stat(filepath.Join(dir, InDir))
	if err != nil || fi.Mode().Perm() != 0o770 || fi.Sys().(*syscall.Stat_t).Gid != uint32(writers) {
		t.Fatalf("in/: %v %v", fi.Mode(), err)
	}
	submit(t, dir, "member", "ls\n")
	waitFile(t, filepath.Join(dir, OutDir, "member.json"))
}

func TestServeBadNamesGoAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	startServe(t, Config{Spool: newSpool(t, dir)})
	for _, name := range []string{"bad name.sh", "no-suffix", "-leading.sh"} {
		if err := os.WriteFile(filepath.Join(dir, InDir, name), []byte("ls"), 0o640); err != nil {
			t.Fatal(err)
		}
		why := waitFile(t, filepath.Join(dir, CorruptDir, name+".why"))
		if !strings.Contains(string(why), "id") {
			t.Errorf("%s: why = %q", name, why)
		}
	}
	// Temporaries are never read.
	if err := os.WriteFile(filepath.Join(dir, InDir, ".x.sh"), []byte("git push"), 0o640); err != nil {
		t.Fatal(err)
	}
	submit(t, dir, "after", "ls")
	waitFile(t, filepath.Join(dir, OutDir, "after.json"))
	if _, err := os.Stat(filepath.Join(dir, InDir, ".x.sh")); err != nil {
		t.Error("a temporary was touched")
	}
}

func TestServeRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	for _, d := range []string{InDir, OutDir, DoneDir} {
		os.MkdirAll(filepath.Join(dir, d), 0o750)
	}
	// A daemon died after writing a verdict and before the move: the
	// decision is not made again.
	old := VerdictFile{ID: "r1", Verdict: vmgate.Verdict{Allowed: true}, Decided: 42}
	old.SHA256 = sha256hex("ls")
	data, _ := json.Marshal(old)
	os.WriteFile(filepath.Join(dir, OutDir, "r1.json"), data, 0o640)
	os.WriteFile(filepath.Join(dir, InDir, "r1.sh"), []byte("ls"), 0o640)
	// A daemon died while a script ran: the reader is told.
	run := VerdictFile{ID: "r2", Verdict: vmgate.Verdict{Allowed: true}, Decided: 43, Run: true}
	data, _ = json.Marshal(run)
	os.WriteFile(filepath.Join(dir, OutDir, "r2.json"), data, 0o640)
	os.WriteFile(filepath.Join(dir, DoneDir, "r2.sh"), []byte("sleep 100"), 0o640)
	// ... but a run another live daemon owns is left alone.
	live := VerdictFile{ID: "r6", Verdict: vmgate.Verdict{Allowed: true}, Decided: 45, Run: true}
	data, _ = json.Marshal(live)
	os.WriteFile(filepath.Join(dir, OutDir, "r6.json"), data, 0o640)
	os.WriteFile(filepath.Join(dir, DoneDir, "r6.sh"), []byte("sleep 100"), 0o640)
	host, _ := os.Hostname()
	os.WriteFile(filepath.Join(dir, OutDir, "r6.owner"), fmt.Appendf(nil, "%s %d\n", host, os.Getpid()), 0o640)
	// Requests written while no daemon ran are decided at start.
	os.WriteFile(filepath.Join(dir, InDir, "r3.sh"), []byte("git push"), 0o640)
	// An id used again for another script: the old verdict is not its.
	stale := VerdictFile{ID: "r5", Verdict: vmgate.Verdict{Allowed: true}, Decided: 44, SHA256: sha256hex("ls")}
	data, _ = json.Marshal(stale)
	os.WriteFile(filepath.Join(dir, OutDir, "r5.json"), data, 0o640)
	os.WriteFile(filepath.Join(dir, InDir, "r5.sh"), []byte("git push"), 0o640)

	startServe(t, Config{Spool: newSpool(t, dir), Poll: 20 * time.Millisecond})
	waitFile(t, filepath.Join(dir, DoneDir, "r1.sh"))
	var got VerdictFile
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "r1.json")), &got)
	if got.Decided != 42 {
		t.Errorf("r1 decided again: %+v", got)
	}
	var ef ExitFile
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "r2.exit")), &ef)
	if ef.Exit != nil || !strings.Contains(ef.Error, "stopped") {
		t.Errorf("r2 exit = %+v", ef)
	}
	if _, err := os.Stat(filepath.Join(dir, OutDir, "r6.exit")); err == nil {
		t.Error("a live daemon's run was taken for a crashed one")
	}
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "r3.json")), &got)
	if got.Allowed || *got.Git != "push" {
		t.Errorf("r3 = %+v", got)
	}
	waitFile(t, filepath.Join(dir, DoneDir, "r5.sh"))
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "r5.json")), &got)
	if got.Allowed || got.Decided == 44 {
		t.Errorf("r5 kept the verdict of another script: %+v", got)
	}
	// Poll mode sees new requests too.
	submit(t, dir, "r4", "git log")
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "r4.json")), &got)
	if !got.Allowed {
		t.Errorf("r4 = %+v", got)
	}
}

func TestServeStopsRunsOnShutdown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	s := startServe(t, Config{Spool: newSpool(t, dir), Machine: &machine.Machine{Command: "sh -s"}, Grace: 100 * time.Millisecond})
	// The script says when the machine runs it: shutdown must stop a run
	// under way, not one still to start.
	running := filepath.Join(t.TempDir(), "running")
	submit(t, dir, "long", "touch "+running+"; sleep 30")
	waitFile(t, running)
	began := time.Now()
	s.stop(t)
	if time.Since(began) > 5*time.Second {
		t.Errorf("shutdown took %v", time.Since(began))
	}
	var ef ExitFile
	json.Unmarshal(waitFile(t, filepath.Join(dir, OutDir, "long.exit")), &ef)
	if !strings.Contains(ef.Error, "shutting down") {
		t.Errorf("exit = %+v", ef)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
