package tests

// The second review's attacks on the tree itself (docs/reliability.md,
// "Attacks", second review: 4, 9, 10, 11, 13, 14, 15), each reproduced
// against the real binaries as it was found. 14 is the Python client's
// alone: clients/python/test_tree.py.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// 4. A FIFO at chats/<chat>/<job>.claim, the mark a --poll daemon leaves
// before a claim: the mark was opened for writing without O_NONBLOCK, so
// both workers blocked there holding their chats' locks, a third chat's
// job stayed queued, and SIGTERM was ignored. The FIFO is replaced by the
// mark now, and every job runs.
func TestAttackClaimMarkFIFO(t *testing.T) {
	dir := newSpool(t)
	var jobs []string
	for _, chat := range []string{"f1", "f2"} {
		id := "fifo-" + chat
		if err := os.MkdirAll(filepath.Join(dir, "chats", chat), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "chats", chat, id+".claim"), 0o640); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, spooldSubmit(t, dir, "--chat", chat, "--id", id, "--", "true"))
	}
	other := spooldSubmit(t, dir, "--chat", "other", "--", "true")
	p := spooldStart(t, dir, "--poll", "100ms", "--workers", "2", "--metrics-file", "off")
	s := openSpool(t, dir, 200)
	for _, job := range append(jobs, other) {
		if r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("%s ended %s: %v", job, r.State, r.Error)
		}
	}
	p.stop(t, 15*time.Second)
}

// 9. `spool submit --batch` split the names of the tree at their first
// dot, so nightly.1.json never counted as taken: while nightly.1 ran, a
// batch with that id exited 0, replaced its spec, left a marker beside
// the lease, and the first run's result was overwritten. The batch is
// refused now, and the run is untouched.
func TestAttackBatchDottedID(t *testing.T) {
	dir := newSpool(t)
	tmp := t.TempDir()
	started, release := filepath.Join(tmp, "started"), filepath.Join(tmp, "release")
	job := spooldSubmit(t, dir, "--chat", "nightly", "--id", "nightly.1", "--", "sh", "-c",
		`touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done; echo first`, started, release)
	spec, _ := os.ReadFile(filepath.Join(dir, job+".json"))
	spooldStart(t, dir, "--metrics-file", "off")
	s := openSpool(t, dir, 200)
	eventually(t, 30*time.Second, 20*time.Millisecond, "nightly.1 to run", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	batch := exec.Command(bin("spool"), "--spool", dir, "submit", "--batch", "-")
	batch.Env = spooldEnv()
	batch.Stdin = strings.NewReader(`{"id":"nightly.1","chat":"nightly","argv":["echo","second"]}` + "\n")
	out, err := batch.CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "already exists") {
		t.Errorf("a batch with the running job's id: exit %d: %s; want 2 and already exists", code, out)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, job+".json")); string(now) != string(spec) {
		t.Errorf("the running job's spec was replaced: %s", now)
	}
	if _, err := os.Lstat(filepath.Join(dir, job+".ready")); err == nil {
		t.Error("a marker stands beside the running job's lease")
	}
	os.WriteFile(release, nil, 0o644)
	if r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond); r.State != spool.Done || r.Attempt != 1 {
		t.Errorf("nightly.1 ended %s, attempt %d", r.State, r.Attempt)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, job+".log")); string(log) != "first\n" {
		t.Errorf("nightly.1's log is %q; want only the first run's", log)
	}
}

// 10. Two submitters of one explicit id both succeeded (186 of 200 single
// submits, 149 of 200 batches in the review): the check and the rename
// were two steps, and a rename replaces. The spec is taken in one step
// now: exactly one exits 0, the other exits 2 with "already exists".
func TestAttackSameIDTwice(t *testing.T) {
	dir := newSpool(t)
	submit := func(kind, id, who string) (int, string) {
		var cmd *exec.Cmd
		doc := fmt.Sprintf(`{"id":%q,"chat":"c","argv":["echo",%q]}`, id, who)
		switch kind {
		case "id":
			cmd = exec.Command(bin("spool"), "--spool", dir, "submit", "--chat", "c", "--id", id, "--", "echo", who)
		case "spec":
			cmd = exec.Command(bin("spool"), "--spool", dir, "submit", "--spec", "-")
			cmd.Stdin = strings.NewReader(doc)
		case "batch":
			cmd = exec.Command(bin("spool"), "--spool", dir, "submit", "--batch", "-")
			cmd.Stdin = strings.NewReader(doc + "\n")
		}
		cmd.Env = spooldEnv()
		out, err := cmd.CombinedOutput()
		return exitCode(err), string(out)
	}
	both := 0
	const rounds = 30
	for _, pair := range [][2]string{{"id", "id"}, {"batch", "batch"}, {"spec", "batch"}} {
		for r := 0; r < rounds; r++ {
			id := fmt.Sprintf("twice-%s-%s-%d", pair[0], pair[1], r)
			var wg sync.WaitGroup
			codes, outs := make([]int, 2), make([]string, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], outs[i] = submit(pair[i], id, fmt.Sprint(i))
				}()
			}
			wg.Wait()
			switch {
			case codes[0] == 0 && codes[1] == 0:
				both++
			case codes[0] != 0 && codes[1] != 0:
				t.Fatalf("%s: neither queued it: %q", id, outs)
			default:
				loser, winner := 0, 1
				if codes[0] == 0 {
					loser, winner = 1, 0
				}
				if codes[loser] != 2 || !strings.Contains(outs[loser], "already exists") {
					t.Errorf("%s: the second submitter exited %d: %s; want 2 and already exists", id, codes[loser], outs[loser])
				}
				var sp spool.Spec
				b, _ := os.ReadFile(filepath.Join(dir, id+".json"))
				if json.Unmarshal(b, &sp) != nil || sp.Argv[1] != fmt.Sprint(winner) {
					t.Errorf("%s: the spec is %s; want submitter %d's", id, b, winner)
				}
			}
		}
	}
	if both > 0 {
		t.Errorf("two submitters of one id both exited 0 in %d of %d rounds", both, 3*rounds)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// 11. A planted lease blocked a chat in --poll mode: its own lease_s (of
// 10^9 s) and a heartbeat a year ahead were believed, so the chat was
// "running" for ever and its next job never ran. Both are bounded by
// spoold's own lease and clock now: the plant dies within a lease, and
// the chat's job runs.
func TestAttackPlantedLease(t *testing.T) {
	for _, c := range []struct {
		name   string
		leaseS float64
		mtime  time.Duration // from now
	}{
		{"huge lease_s", 1e9, 0},
		{"heartbeat in the future", 2, 365 * 24 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newSpool(t)
			const planted = "planted"
			os.MkdirAll(filepath.Join(dir, "chats", "blocked"), 0o750)
			os.WriteFile(filepath.Join(dir, planted+".json"), []byte(`{"chat":"blocked","argv":["true"]}`), 0o640)
			lease := fmt.Sprintf(`{"job":%q,"chat":"blocked","worker":"w","host":"elsewhere","pid":1,"claimed":%f,"attempt":1,"lease_s":%g}`,
				planted, spool.Now(), c.leaseS)
			running := filepath.Join(dir, planted+".running")
			os.WriteFile(running, []byte(lease), 0o640)
			now := time.Now().Add(c.mtime)
			os.Chtimes(running, now, now)
			os.WriteFile(filepath.Join(dir, "chats", "blocked", planted+".claim"), nil, 0o640)
			job := spooldSubmit(t, dir, "--chat", "blocked", "--", "true")
			spooldStart(t, dir, "--poll", "200ms", "--lease", "2s", "--metrics-file", "off")
			s := openSpool(t, dir, 200)
			if r := waitEnd(t, s, job, 30*time.Second, 50*time.Millisecond); r.State != spool.Done {
				t.Errorf("the blocked chat's job ended %s: %v", r.State, r.Error)
			}
		})
	}
}

// attackNobodyCan makes dir and the directories of the test above it
// traversable by the other user, and the built binaries runnable by it.
func attackNobodyCan(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(binDir, 0o755)
}

// 13. Root using the clients on a spool that belongs to the service user
// (the README allows root) wrote 0640 root:root documents the service
// user's spoold could not read: the job waited for ever ("cannot read
// spec; will retry"), and after root's `spool answer` the job's `spool
// ask` got permission denied. Root's documents take the spool's owner and
// group now: the jobs run, and the question is answered.
func TestAttackRootClientsOwnership(t *testing.T) {
	attackNeedRoot(t)
	base := t.TempDir()
	attackNobodyCan(t, base)
	dir := filepath.Join(base, "spool")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, attackNobody, attackNobody); err != nil {
		t.Fatal(err)
	}
	// spoold runs as the spool's owner, as the packaged unit does.
	d := exec.Command(bin("spoold"), "--spool", dir, "--metrics-file", "off")
	d.Env = spooldEnv()
	d.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: attackNobody, Gid: attackNobody}}
	logf, _ := os.Create(filepath.Join(t.TempDir(), "spoold.log"))
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Process.Signal(syscall.SIGINT)
		d.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("spoold (as uid %d) log:\n%s", attackNobody, b)
		}
	})
	eventually(t, 20*time.Second, 20*time.Millisecond, "spoold to make the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, "chats"))
		return err == nil
	})
	s := openSpool(t, dir, 200)
	// Root submits a job that asks, and answers it.
	job := spooldSubmit(t, dir, "--chat", "c", "--", "sh", "-c", `a=$(spool ask "go on?") || exit 3; echo "got $a"`)
	eventually(t, 30*time.Second, 20*time.Millisecond, "the question", func() bool {
		p, err := s.ReadProgress("c")
		return err == nil && p.Question != nil
	})
	if out, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "c", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer as root: %v: %s", err, out)
	}
	if r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Fatalf("root's job ended %s: %v", r.State, r.Error)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, job+".log")); string(log) != "got yes\n" {
		t.Errorf("the job's log: %q", log)
	}
	// The Python client, as root, the same.
	if _, err := exec.LookPath("python3"); err == nil {
		py := exec.Command("python3", "-c", `import sys; sys.path.insert(0, sys.argv[1]); import vmspool; print(vmspool.submit("py", argv=["true"], spool=sys.argv[2]))`,
			filepath.Join("..", "clients", "python"), dir)
		out, err := py.Output()
		if err != nil {
			t.Fatalf("python submit as root: %v", err)
		}
		if r := waitEnd(t, s, strings.TrimSpace(string(out)), 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("root's Python job ended %s: %v", r.State, r.Error)
		}
	}
	// Root's hand submission under umask 077 (docs/contract.md, 5) is a
	// 0600 root:root spec no client could fix: the job ends failed, saying
	// why, rather than wait for ever.
	hand := exec.Command("sh", "-c", `umask 077; cd "$0" && printf '{"chat":"hand","argv":["true"]}' > .h.json && mv .h.json h.json && : > .h.ready && mv .h.ready h.ready`, dir)
	if out, err := hand.CombinedOutput(); err != nil {
		t.Fatalf("hand submit: %v: %s", err, out)
	}
	if r := waitEnd(t, s, "h", 30*time.Second, 20*time.Millisecond); r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "permission denied") {
		t.Errorf("root's unreadable hand submission ended %s: %v", r.State, r.Error)
	}
	if b, _ := os.ReadFile(logf.Name()); strings.Count(string(b), "cannot read spec") > 0 {
		t.Errorf("spoold waited on a spec it could not read:\n%s", b)
	}
}

// 15. CheckRootSafe checked the spool's path, not the directory spoold
// held, nor the directories above it: a root spoold ran a spool whose
// parent another user owns or may write (who can put another spool in
// its place). Those are refused now; a sticky parent such as /tmp is
// fine.
func TestAttackRootSpoolParents(t *testing.T) {
	attackNeedRoot(t)
	for _, c := range []struct {
		name, want string
		prep       func(parent string) error
	}{
		{"parent another user's", "owned by uid 65534", func(p string) error { return os.Chown(p, attackNobody, attackNobody) }},
		{"parent writable by others", "writable by group or others", func(p string) error { return os.Chmod(p, 0o777) }},
		{"parent writable by its group", "writable by group or others", func(p string) error { return os.Chmod(p, 0o775) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, dir := spoolUnder(t, func(parent, _ string) error { return c.prep(parent) })
			cmd := exec.Command(bin("spoold"), "--spool", dir, "--metrics-file", "off")
			cmd.Env = spooldEnv()
			code, out := exitsAtStart(t, cmd, 20*time.Second, "a root spoold served a spool under an unsafe parent")
			if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(out, parent) {
				t.Fatalf("spoold exited %d: %s; want 1, %q and the parent named", code, out, c.want)
			}
		})
	}
	t.Run("sticky parent", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "parent")
		dir := filepath.Join(parent, "spool")
		os.MkdirAll(dir, 0o750)
		os.Chmod(parent, os.ModeSticky|0o777)
		job := spooldSubmit(t, dir, "--chat", "c", "--", "true")
		spooldStart(t, dir, "--metrics-file", "off")
		s := openSpool(t, dir, 200)
		if r := waitEnd(t, s, job, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("job ended %s", r.State)
		}
	})
}

// 10, over sshfs, which refuses renameat2's RENAME_NOREPLACE and answers
// a link(2) over an existing name with EPERM: two submitters of one id on
// a host that mounts the spool still queue it once, the other told it
// already exists, and both ways of taking a name are used there (the
// flag refused, then a link).
func TestMultiHostTakeOnce(t *testing.T) {
	c := mhStart(t, "sshfs")
	const rounds = 20
	errs := filepath.Join(c.dir, "errs")
	h := c.host("take", "h1", nil, "sh", "-c", `for i in $(seq `+fmt.Sprint(rounds)+`); do
	spool --spool "$SPOOL" submit --chat c --id "t$i" -- true >/dev/null 2>>"$0" &
	spool --spool "$SPOOL" submit --chat c --id "t$i" -- true >/dev/null 2>>"$0" &
	wait
done
echo "all submitted"
sleep 600`, errs)
	eventually(t, 120*time.Second, 50*time.Millisecond, "the host's submits", func() bool {
		return strings.Contains(h.p.logText(), "all submitted")
	})
	b, _ := os.ReadFile(errs)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	taken := 0
	for _, l := range lines {
		if strings.Contains(l, "already exists") {
			taken++
		} else if l != "" {
			t.Errorf("a submit over sshfs failed: %s", l)
		}
	}
	if taken != rounds {
		t.Errorf("%d of %d second submitters were told the id already exists; want all (both queued it in the others)", taken, rounds)
	}
	for i := 1; i <= rounds; i++ {
		if _, err := os.Stat(filepath.Join(c.spool, fmt.Sprintf("t%d.ready", i))); err != nil {
			t.Errorf("t%d: not queued: %v", i, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(c.spool, ".*")); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}
}
