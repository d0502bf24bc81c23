package tests

// Power loss at every boundary of a few job lives. The spool lives on
// internal/powerfs, a FUSE filesystem that remembers what was made
// durable; the power is cut at boundary k (every create, rename, unlink,
// mkdir and fsync is one), the machine "reboots" onto what a disk would
// still hold, runs `spool fsck --fix` and spoold, and the tree is checked:
// every submit that returned is there and ends exactly once, nothing reads
// torn, nothing ended goes back. docs/reliability.md gives the figures.
//
// POWERLOSS=full runs the long workload (bulk and Python submits, a
// question, a cancel, a retry, gc) at every boundary; the default is the
// short one at every boundary, and the long one at a sample.

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/internal/powerfs"
	"github.com/vmspool/vmspool/spool"
)

// plWorld is one run of a workload on a power-losing spool.
type plWorld struct {
	t       *testing.T
	fs      *powerfs.FS
	dir     string // the mounted spool
	log     string // the jobs' own record, outside the spool
	env     []string
	spoold  *proc
	ok      map[string]bool // jobs whose submit returned success
	chatOf  map[string]string
	tries   map[string]int // a job's attempts when not 1
	stepErr error          // the first step that failed
}

// plMount makes a tmpfs backing (its inode numbers are not reused) with
// an empty spool, and mounts it power-losing with the cut; it skips where
// FUSE or tmpfs cannot be mounted.
func plMount(t *testing.T, cut int) *plWorld {
	t.Helper()
	backing, mnt := t.TempDir(), t.TempDir()
	if err := syscall.Mount("tmpfs", backing, "tmpfs", 0, "size=2g,mode=0755"); err != nil {
		t.Skipf("skipped: the power-loss test needs root to mount a tmpfs and FUSE: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(backing, syscall.MNT_DETACH) })
	s, err := spool.Create(filepath.Join(backing, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	fs, err := powerfs.Mount(backing, mnt, cut)
	if errors.Is(err, powerfs.ErrUnsupported) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Unmount() }) // a test that stopped half-way
	w := &plWorld{t: t, fs: fs, dir: filepath.Join(mnt, "spool"), log: filepath.Join(t.TempDir(), "jobs.log"),
		ok: map[string]bool{}, chatOf: map[string]string{}, tries: map[string]int{}}
	w.env = append(raceEnv(), "PLLOG="+w.log)
	return w
}

// plJob is a job's argv: it records its start and end outside the spool.
func plJob(extra string) []string {
	return []string{"sh", "-c", `echo "start $SPOOL_JOB $$" >> "$PLLOG"; ` + extra + `; echo "end $SPOOL_JOB" >> "$PLLOG"`}
}

// step runs one step of a workload unless one failed before. A step that
// fails while the power is on fails the test; once it is cut, failing is
// what steps do, and the workload stops.
func (w *plWorld) step(what string, fn func() error) bool {
	if w.stepErr != nil {
		return false
	}
	if err := fn(); err != nil {
		w.stepErr = fmt.Errorf("%s: %w", what, err)
		if !w.fs.Dead() {
			w.t.Fatalf("%s failed with the power on: %v", what, err)
		}
		return false
	}
	return true
}

func (w *plWorld) submit(chat string, args ...string) bool {
	return w.step("submit", func() error {
		cmd := exec.Command(bin("spool"), append([]string{"--spool", w.dir, "submit", "--chat", chat, "--env", "PLLOG=" + w.log}, args...)...)
		cmd.Env = w.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		id := strings.TrimSpace(string(out))
		w.ok[id], w.chatOf[id] = true, chat
		return nil
	})
}

// wait waits for the jobs to end, or the power to go.
func (w *plWorld) wait(jobs ...string) bool {
	return w.step("wait", func() error {
		deadline := time.Now().Add(30 * time.Second)
		for _, j := range jobs {
			for {
				if w.fs.Dead() {
					return errors.New("the power is cut")
				}
				if st := plState(w.dir, j); st.Final() {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("job %s did not end", j)
				}
				time.Sleep(10 * time.Millisecond) // the poll of the wait (it ends early when the power goes)
			}
		}
		return nil
	})
}

// plState is a job's state by the names in dir, read without opening the
// spool through package spool (a dead filesystem fails every open).
func plState(dir, job string) spool.State {
	for _, st := range []spool.State{spool.Done, spool.Failed, spool.Cancelled, spool.Running, spool.Queued} {
		if _, err := os.Lstat(filepath.Join(dir, job+st.Ext())); err == nil {
			return st
		}
	}
	return ""
}

func (w *plWorld) lastJob() string {
	var last string
	for j := range w.ok {
		if j > last {
			last = j
		}
	}
	return last
}

// shortWorkload is two runs of one chat, the second a follow-up: two
// submits, two claims, runs, results and final progress, and the chat
// cleared between them.
func shortWorkload(w *plWorld) {
	if !w.submit("c", append([]string{"--"}, plJob("spool say working")...)...) {
		return
	}
	first := w.lastJob()
	w.step("start spoold", func() error {
		w.spoold = startProc(w.t, w.env, "spoold", "--spool", w.dir, "--lease", "1s", "--metrics-file", "off")
		w.spoold.quiet = true
		return nil
	})
	if !w.wait(first) || !w.submit("c", append([]string{"--"}, plJob("spool say again")...)...) {
		return
	}
	w.wait(w.lastJob())
}

// longWorkload adds a bulk submit, a question answered, a cancel, a job
// that fails and is retried after its backoff, and gc.
func longWorkload(w *plWorld) {
	shortWorkload(w)
	w.step("batch", func() error {
		var lines []string
		for i := 0; i < 2; i++ {
			lines = append(lines, fmt.Sprintf(`{"chat":"b%d","env":{"PLLOG":%q},"argv":["sh","-c","echo \"start $SPOOL_JOB $$\" >> \"$PLLOG\"; echo \"end $SPOOL_JOB\" >> \"$PLLOG\""]}`, i, w.log))
		}
		cmd := exec.Command(bin("spool"), "--spool", w.dir, "submit", "--batch", "-")
		cmd.Env = w.env
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for i, id := range strings.Fields(string(out)) {
			w.ok[id], w.chatOf[id] = true, fmt.Sprintf("b%d", i)
		}
		return nil
	})
	w.step("python submit", func() error {
		py, err := exec.LookPath("python3")
		if err != nil {
			return nil // said by the Python tests; the Go paths are swept anyway
		}
		code := `import sys, vmspool; print(vmspool.submit("p", ["sh", "-c", sys.argv[2]], env={"PLLOG": sys.argv[3]}, spool=sys.argv[1]))`
		cmd := exec.Command(py, "-c", code, w.dir, plJob("true")[2], w.log)
		cmd.Env = append(w.env, "PYTHONPATH="+filepath.Join("..", "clients", "python"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		id := strings.TrimSpace(string(out))
		w.ok[id], w.chatOf[id] = true, "p"
		return nil
	})
	w.wait(w.lastJob())
	w.submit("q", append([]string{"--"}, plJob(`a=$(spool ask --timeout 5s "Go on?"); echo "answer $a" >> "$PLLOG"`)...)...)
	q := w.lastJob()
	w.step("answer", func() error {
		// Tried until the question is open (exit 1 before): the poll of the wait.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !w.fs.Dead(); time.Sleep(10 * time.Millisecond) {
			cmd := exec.Command(bin("spool"), "--spool", w.dir, "answer", "--chat", "q", "yes")
			cmd.Env = w.env
			if cmd.Run() == nil {
				return nil
			}
		}
		return errors.New("no question to answer")
	})
	w.wait(q)
	w.submit("k", append([]string{"--"}, plJob("sleep 30")...)...)
	k := w.lastJob()
	w.step("cancel", func() error {
		cmd := exec.Command(bin("spool"), "--spool", w.dir, "cancel", "--wait", "--timeout", "20s", k)
		cmd.Env = w.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	if w.submit("r", "--attempts", "2", "--", "sh", "-c", `echo "start $SPOOL_JOB $$" >> "$PLLOG"; echo "end $SPOOL_JOB" >> "$PLLOG"; exit 3`) {
		w.tries[w.lastJob()] = 2
	}
	r := w.lastJob()
	w.wait(r)
	// Asked to run again: its attempts start anew.
	w.step("requeue", func() error {
		w.tries[r] = 4
		cmd := exec.Command(bin("spool"), "--spool", w.dir, "requeue", r)
		cmd.Env = w.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	w.wait(r)
	w.step("gc", func() error {
		cmd := exec.Command(bin("spool"), "--spool", w.dir, "gc", "--older", "0s")
		cmd.Env = w.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// crash cuts the power if the workload did not reach the cut, kills
// everything that ran (spoold and its jobs: the machine died), and
// returns the tree a disk would hold.
func (w *plWorld) crash() string {
	t := w.t
	if w.spoold != nil {
		w.spoold.kill()
	}
	for _, pid := range plPids(w.log) {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := w.fs.Unmount(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "disk")
	if err := w.fs.Rebuild(dst); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "spool")
}

// plLines are the lines the jobs recorded.
func plLines(log string) []string {
	f, err := os.Open(log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// plPids are the pids the jobs recorded.
func plPids(log string) []int {
	var pids []int
	for _, line := range plLines(log) {
		if fs := strings.Fields(line); len(fs) == 3 && fs[0] == "start" {
			if pid, err := strconv.Atoi(fs[2]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// reboot runs fsck --fix and spoold on the disk until every job has
// ended, and checks the tree; it returns the violations.
func (w *plWorld) reboot(disk string) []string {
	t := w.t
	var bad []string
	// Before anything runs: what was durably ended, and guard 1.
	ended := map[string]spool.State{}
	ents, err := os.ReadDir(disk)
	if err != nil {
		return []string{fmt.Sprintf("the spool directory is gone: %v", err)}
	}
	jobs := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		job, ext, ok := strings.Cut(name, ".")
		if !ok || !spool.ValidID(job) {
			continue
		}
		jobs[job] = true
		if st := spool.State(ext); st.Final() {
			ended[job] = st
		}
	}
	for job := range jobs {
		chat := w.chatOf[job]
		if chat == "" {
			continue
		}
		// Guard 1: a queued or later job's chat holds no document of an
		// earlier job of the chat.
		if st := plState(disk, job); st == spool.Queued {
			if b, err := os.ReadFile(filepath.Join(disk, spool.ProgressDir, chat)); err == nil {
				if p, err := spool.ParseProgress(b); err == nil && p.Job != job && p.Job < job {
					bad = append(bad, fmt.Sprintf("job %s is queued, and its chat %s holds the progress of the earlier job %s", job, chat, p.Job))
				}
			}
		}
	}
	fsck := exec.Command(bin("spool"), "--spool", disk, "fsck", "--fix")
	fsck.Env = w.env
	if out, err := fsck.CombinedOutput(); err != nil && exitCode(err) != 1 {
		bad = append(bad, fmt.Sprintf("fsck --fix: %v: %s", err, out))
	}
	d := startProc(t, w.env, "spoold", "--spool", disk, "--lease", "1s", "--metrics-file", "off")
	eventually(t, 20*time.Second, 10*time.Millisecond, "spoold to serve", func() bool {
		return strings.Contains(d.logText(), "serving")
	})
	s, err := spool.Open(disk)
	if err != nil {
		return append(bad, err.Error())
	}
	defer s.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := s.List(spool.ListOptions{})
		if err != nil {
			return append(bad, fmt.Sprintf("ls: %v", err))
		}
		// A spec without a marker is a submit the cut interrupted: it
		// waits for fsck's grace, and is checked below if it returned.
		live := 0
		for _, r := range rows {
			if !r.State.Final() && r.State != spool.New {
				live++
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			return append(bad, fmt.Sprintf("%d jobs never ended after the reboot: %+v", live, rows))
		}
		time.Sleep(20 * time.Millisecond) // the poll of the wait
	}
	d.stop(t, 20*time.Second)
	// Every submit that returned is there, ended once; nothing ended went
	// back; every document reads whole.
	for job := range w.ok {
		files, err := s.JobFiles(job)
		if err != nil {
			bad = append(bad, fmt.Sprintf("job %s: %v", job, err))
			continue
		}
		st, ok := files.State()
		switch {
		case files == 0 && plGCd(w, job):
			// collected by the workload's gc before the cut
		case !ok || files.States() != 1:
			bad = append(bad, fmt.Sprintf("job %s (submitted) is lost or in %d states: %v", job, files.States(), files))
		case !st.Final():
			bad = append(bad, fmt.Sprintf("job %s did not end: %s", job, st))
		}
	}
	for job, was := range ended {
		if st := plState(disk, job); st != was && st != "" {
			bad = append(bad, fmt.Sprintf("job %s was %s on the disk and is %s after the reboot", job, was, st))
		}
	}
	// A job starts no more often than its attempts allow, the crash
	// included: a claim the disk forgot would start it once more.
	starts := map[string]int{}
	for _, line := range plLines(w.log) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "start" {
			starts[f[1]]++
		}
	}
	for job, n := range starts {
		if max := max(1, w.tries[job]); n > max {
			bad = append(bad, fmt.Sprintf("job %s started %d times; it may start %d", job, n, max))
		}
	}
	check := exec.Command(bin("spool"), "--spool", disk, "fsck")
	check.Env = w.env
	if out, err := check.CombinedOutput(); err != nil {
		bad = append(bad, fmt.Sprintf("fsck after the reboot: %v: %s", err, out))
	}
	bad = append(bad, plTorn(s, disk)...)
	return bad
}

// plGCd: the job ended and the workload's gc ran (its files may be gone).
func plGCd(w *plWorld, job string) bool {
	return slices.ContainsFunc(w.fs.Ops(), func(op string) bool { return strings.Contains(op, "unlink spool/"+job+".json") })
}

// plTorn reads every document of the tree through package spool: none may
// fail to parse.
func plTorn(s *spool.Spool, disk string) []string {
	var bad []string
	ents, _ := os.ReadDir(disk)
	for _, e := range ents {
		name := e.Name()
		job, ext, _ := strings.Cut(name, ".")
		if strings.HasPrefix(name, ".") || !spool.ValidID(job) {
			continue
		}
		var err error
		switch "." + ext {
		case spool.ExtSpec:
			_, err = s.ReadSpec(job)
		case spool.ExtDone, spool.ExtFailed, spool.ExtCancelled:
			_, err = s.ReadResult(job, spool.State(ext))
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s does not read: %v", name, err))
		}
	}
	chats, _ := os.ReadDir(filepath.Join(disk, spool.ProgressDir))
	for _, c := range chats {
		if strings.HasPrefix(c.Name(), ".") {
			continue
		}
		if _, err := s.ReadProgress(c.Name()); err != nil {
			bad = append(bad, fmt.Sprintf("progress/%s does not read: %v", c.Name(), err))
		}
	}
	return bad
}

// plSweep runs workload uncut to count its boundaries, then cut at
// boundary first and every `every` after it, and reports the violations.
func plSweep(t *testing.T, workload func(*plWorld), every, first int) {
	w := plMount(t, 0)
	workload(w)
	if w.spoold != nil {
		w.spoold.stop(t, 20*time.Second)
	}
	n := w.fs.Boundaries()
	disk := w.crash()
	if bad := w.reboot(disk); len(bad) > 0 {
		t.Fatalf("uncut run: %s", strings.Join(bad, "\n"))
	}
	t.Logf("%d boundaries uncut", n)
	tried, jobs, violations := 0, 0, 0
	for cut := first; cut <= n; cut += every {
		t.Run(fmt.Sprintf("cut%03d", cut), func(t *testing.T) {
			w := plMount(t, cut)
			workload(w)
			ops := w.fs.Ops()
			disk := w.crash()
			bad := w.reboot(disk)
			tried++
			jobs += len(w.ok)
			violations += len(bad)
			if len(bad) > 0 {
				t.Errorf("power cut at %q: %d violations:\n%s\nthe boundaries before it:\n%s",
					ops[len(ops)-1], len(bad), strings.Join(bad, "\n"), strings.Join(ops[max(0, len(ops)-15):], "\n"))
			}
		})
	}
	t.Logf("crash points tried %d, jobs whose submit returned %d, violations %d", tried, jobs, violations)
}

// The sweeps and the soak run beside each other (t.Parallel), two at a
// time after the serial tests: each spends most of its time waiting on
// its own processes and mounts, so that two of them on two cores take
// little more than one.
func TestPowerLossShort(t *testing.T) {
	t.Parallel()
	plSweep(t, shortWorkload, 1, 1)
}

// TestPowerLossLong cuts the long workload at a sample of its boundaries,
// a different one each run (POWERLOSS_FIRST=n repeats one), or at every
// one with POWERLOSS=full.
func TestPowerLossLong(t *testing.T) {
	t.Parallel()
	every, first := 25, 1+rand.IntN(25)
	if os.Getenv("POWERLOSS") == "full" {
		every, first = 1, 1
	}
	if v, err := strconv.Atoi(os.Getenv("POWERLOSS_FIRST")); err == nil && v > 0 {
		first = v
	}
	t.Logf("cutting at boundary %d and every %d after it (POWERLOSS_FIRST=%d repeats this sample)", first, every, first)
	plSweep(t, longWorkload, every, first)
}

// TestPowerLossLeaseRewrite: a running job's lease is rewritten a moment
// after its start, to record its process group; the rewrite's rename is
// made durable by the next sync of the root, any other job's submit,
// claim or result. The power is cut then, while the job runs: the lease
// must read back whole, the claim's or the rewrite's, so that the job,
// which has one attempt, is ended "worker died" after the reboot and not
// started again. (Unsynced, the rewrite read back empty: an unfinished
// claim, whose job was queued again and started a second time.)
func TestPowerLossLeaseRewrite(t *testing.T) {
	w := plMount(t, 0)
	// The job waits until its lease names its process group, says so
	// outside the spool, and runs until the machine dies.
	if !w.submit("a", "--", "sh", "-c", `echo "start $SPOOL_JOB $$" >> "$PLLOG"
until grep -q '"pgid"' "$SPOOL_DIR/$SPOOL_JOB.running"; do sleep 0.02; done
: > "$PLLOG.pgid"; sleep 60; echo "end $SPOOL_JOB" >> "$PLLOG"`) {
		t.Fatal(w.stepErr)
	}
	job := w.lastJob()
	w.spoold = startProc(t, w.env, "spoold", "--spool", w.dir, "--lease", "1s", "--metrics-file", "off")
	w.spoold.quiet = true
	eventually(t, 20*time.Second, 10*time.Millisecond, "the job's lease to record its process group", func() bool {
		_, err := os.Stat(w.log + ".pgid")
		return err == nil
	})
	// Another job's submit syncs the root, rename of the rewrite included.
	if !w.submit("b", append([]string{"--"}, plJob("true")...)...) {
		t.Fatal(w.stepErr)
	}
	w.fs.Cut()
	disk := w.crash()
	if b, err := os.ReadFile(filepath.Join(disk, job+spool.ExtRunning)); err != nil || len(b) == 0 {
		t.Errorf("the running job's lease after the cut: %q, %v; want the claim's or the rewrite's", b, err)
	}
	for _, b := range w.reboot(disk) {
		t.Error(b)
	}
	if r, err := spool.Open(disk); err == nil {
		defer r.Close()
		if res, err := r.ReadResult(job, spool.Failed); err != nil || res.Error == nil || !strings.Contains(*res.Error, "died") {
			t.Errorf("the job running at the cut: %+v, %v; want it failed, its worker died", res, err)
		}
	}
}
