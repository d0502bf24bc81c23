package tests

// One way a job ends: whichever path ends it (its process's exit, a
// timeout, a cancel while running or queued, the gate, a spec that cannot
// run, a program that cannot start, shutdown past the grace, a dead worker
// with no attempt left, fsck, an end a crash stopped half-way), the tree
// an operator reads afterwards has one shape: one result, one end event
// and it is the last event, the chat's document done with the same state
// and error, no lease and no marker.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// deadPID is above the kernel's largest pid_max: no process has it.
const deadPID = 1<<22 + 1

// endCase is one job ended by one path, and how it must have ended.
type endCase struct {
	path, job, chat string
	s               *spool.Spool
	state           spool.State
	err             string // the result's error: exactly, or a part of it after "~"
}

// checkEnded reads an ended job the way an operator would (ls, cat) and
// says what is not of the one shape.
func checkEnded(t *testing.T, c endCase) {
	t.Helper()
	s, job := c.s, c.job
	f, err := s.JobFiles(job)
	if err != nil {
		t.Fatalf("%s: %v", c.path, err)
	}
	st, _ := f.State()
	if f.States() != 1 || !st.Final() || f&(spool.HasRunning|spool.HasReady) != 0 {
		t.Errorf("%s: job %s files %b: want one result and no lease or marker", c.path, job, f)
		return
	}
	r, err := s.ReadResult(job, st)
	if err != nil {
		t.Fatalf("%s: %v", c.path, err)
	}
	errText := ""
	if r.Error != nil {
		errText = *r.Error
	}
	okErr := errText == c.err
	if part, ok := strings.CutPrefix(c.err, "~"); ok {
		okErr = strings.Contains(errText, part)
	}
	if r.State != c.state || !okErr || r.Finished == 0 || r.Chat != c.chat {
		t.Errorf("%s: result %s %q chat %q finished %v; want %s %q chat %q", c.path, r.State, errText, r.Chat, r.Finished, c.state, c.err, c.chat)
	}
	evs, err := s.NewEventReader(job).Tail(10000)
	if err != nil {
		t.Fatal(err)
	}
	var ends []spool.Event
	for _, ev := range evs {
		if ev.Type == spool.EventEnd {
			ends = append(ends, ev)
		}
	}
	if len(ends) != 1 || len(evs) == 0 || evs[len(evs)-1].Type != spool.EventEnd {
		t.Errorf("%s: %d end events, last event %+v; want one end event, last", c.path, len(ends), evs[len(evs)-1])
	} else if e := ends[0]; e.State != r.State || e.Text != spool.EndText(r) {
		t.Errorf("%s: end event %q (%s); want %q (%s)", c.path, e.Text, e.State, spool.EndText(r), r.State)
	}
	p, err := s.ReadProgress(c.chat)
	if err != nil {
		t.Errorf("%s: progress/%s: %v", c.path, c.chat, err)
		return
	}
	if p.Job != job || !p.Done || p.State != r.State || (p.Error == nil) != (r.Error == nil) || p.Error != nil && *p.Error != errText || len(p.Events) == 0 || p.Events[len(p.Events)-1].Type != spool.EventEnd {
		t.Errorf("%s: progress/%s %+v; want job %s done, %s %q, its end event last", c.path, c.chat, p, job, r.State, errText)
	}
}

// endClaimDead submits a job and claims it as a worker of this host
// whose process is gone, as a run that was killed leaves it.
func endClaimDead(t *testing.T, s *spool.Spool, dir, chat, worker string) (string, *spool.Lease) {
	t.Helper()
	job := spooldSubmit(t, dir, "--chat", chat, "--", "true")
	return job, endClaim(t, s, job, chat, worker, deadPID)
}

// endCrashed begins the end of a dead worker's job and stops it after the
// chat's last document, before the result, as a kill -9 there would: the
// goroutine that ends it exits on the spot.
func endCrashed(t *testing.T, s *spool.Spool, job, chat string, l *spool.Lease) {
	t.Helper()
	zero := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.End(spool.Ending{Result: &spool.Result{Job: job, Chat: chat, State: spool.Done, Exit: &zero, Attempt: l.Attempt, Worker: l.Worker},
			Lease: l, Worker: l.Worker, BeforeResult: runtime.Goexit})
		t.Error("the end was not stopped")
	}()
	<-done
	if st, _ := s.State(job); st != spool.Running {
		t.Fatalf("job %s after the crash: %s, want running", job, st)
	}
}

func TestEndEveryPath(t *testing.T) {
	var cases []endCase

	// Ended by spoold.
	dir := newSpool(t)
	a := spooldStart(t, dir, "--workers", "8", "--lease", "2s", "--kill-grace", "500ms", "--worker", "A")
	s := openSpool(t, dir, 200)
	add := func(path, job, chat string, st spool.State, err string) {
		cases = append(cases, endCase{path: path, job: job, chat: chat, s: s, state: st, err: err})
	}
	add("exit 0", spooldSubmit(t, dir, "--chat", "done", "--", "true"), "done", spool.Done, "")
	add("exit 3", spooldSubmit(t, dir, "--chat", "exit", "--", "sh", "-c", "exit 3"), "exit", spool.Failed, "exit status 3")
	add("timeout", spooldSubmit(t, dir, "--chat", "timeout", "--timeout", "1s", "--", "sleep", "30"), "timeout", spool.Failed, "timed out after 1s")
	add("no such program", spooldSubmit(t, dir, "--chat", "missing", "--", "no-such-program-here"), "missing", spool.Failed, "~no-such-program-here")
	gate := spoolIn(t, dir, "git commit -m x\n", "submit", "--chat", "gate", "--script", "-")
	add("gate", gate, "gate", spool.Failed, "~git")
	spooldHandSubmit(t, dir, "refused", "refused", `{"chat":"refused","argv":[]}`)
	add("spec that cannot run", "refused", "refused", spool.Failed, "~argv")
	running := spooldSubmit(t, dir, "--chat", "cancel", "--", "sleep", "30")
	add("cancel while running", running, "cancel", spool.Cancelled, "cancelled")
	// Queued, not before an hour from now (a marker's mtime, set before
	// the rename that queues it): only the cancel ends it.
	hour := time.Now().Add(time.Hour)
	for _, err := range []error{
		os.WriteFile(s.Path("later.json"), []byte(`{"chat":"queued","argv":["true"]}`), 0o640),
		os.WriteFile(s.Path(".later.ready"), nil, 0o640),
		os.Chtimes(s.Path(".later.ready"), hour, hour),
		os.Rename(s.Path(".later.ready"), s.Path("later.ready")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	add("cancel while queued", "later", "queued", spool.Cancelled, "cancelled before it started")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the job to run", func() bool {
		held, _ := s.SpecLocked(running)
		return held
	})
	for _, job := range []string{running, "later"} {
		if out, err := command(spooldEnv(), "spool", "--spool", dir, "cancel", job).CombinedOutput(); err != nil {
			t.Fatalf("spool cancel %s: %v: %s", job, err, out)
		}
	}
	for _, c := range cases {
		waitEnd(t, s, c.job, 20*time.Second, 10*time.Millisecond)
	}
	a.stop(t, 20*time.Second)

	// A worker that dies with no attempt left; another recovers its job.
	ddir := newSpool(t)
	ds := openSpool(t, ddir, 200)
	c := spooldStart(t, ddir, "--lease", "2s", "--kill-grace", "500ms", "--worker", "C")
	died := spooldSubmit(t, ddir, "--chat", "died", "--", "sleep", "30")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the job to run", func() bool {
		held, _ := ds.SpecLocked(died)
		return held
	})
	c.kill()
	r := spooldStart(t, ddir, "--lease", "2s", "--kill-grace", "500ms", "--worker", "R")
	waitEnd(t, ds, died, 20*time.Second, 10*time.Millisecond)
	r.stop(t, 20*time.Second)
	cases = append(cases, endCase{path: "dead worker", job: died, chat: "died", s: ds, state: spool.Failed, err: "worker C died"})

	// Shutdown past the grace, no attempt left.
	sdir := newSpool(t)
	sd := spooldStart(t, sdir, "--grace", "200ms", "--kill-grace", "500ms")
	ss := openSpool(t, sdir, 200)
	long := spooldSubmit(t, sdir, "--chat", "shutdown", "--", "sleep", "30")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the job to run", func() bool {
		held, _ := ss.SpecLocked(long)
		return held
	})
	sd.stop(t, 20*time.Second)
	cases = append(cases, endCase{path: "shutdown", job: long, chat: "shutdown", s: ss, state: spool.Failed, err: "interrupted by shutdown"})

	// Ended by fsck --fix, with no daemon on the spool: a dead worker's
	// job, a queued spec that does not parse, and an end a crash stopped.
	fdir := newSpool(t)
	fs := openSpool(t, fdir, 200)
	zjob, _ := endClaimDead(t, fs, fdir, "fsck-dead", "Z")
	spooldHandSubmit(t, fdir, "unparsable", "fsck-spec", `{"chat":"fsck-spec","argv":[]}`)
	cjob, cl := endClaimDead(t, fs, fdir, "fsck-crash", "Y")
	endCrashed(t, fs, cjob, "fsck-crash", cl)
	if out, err := command(spooldEnv(), "spool", "--spool", fdir, "fsck", "--fix").CombinedOutput(); err != nil {
		t.Fatalf("spool fsck --fix: %v: %s", err, out)
	}
	cases = append(cases,
		endCase{path: "fsck: dead worker", job: zjob, chat: "fsck-dead", s: fs, state: spool.Failed, err: "worker Z died"},
		endCase{path: "fsck: spec that does not parse", job: "unparsable", chat: "fsck-spec", s: fs, state: spool.Failed, err: "spec does not parse (moved to corrupt/unparsable.json)"},
		endCase{path: "fsck: an end stopped by a crash", job: cjob, chat: "fsck-crash", s: fs, state: spool.Done})

	// An end a crash stopped, finished by spoold.
	xjob, xl := endClaimDead(t, fs, fdir, "spoold-crash", "X")
	endCrashed(t, fs, xjob, "spoold-crash", xl)
	x := spooldStart(t, fdir, "--lease", "2s")
	waitEnd(t, fs, xjob, 20*time.Second, 10*time.Millisecond)
	x.stop(t, 20*time.Second)
	cases = append(cases, endCase{path: "spoold: an end stopped by a crash", job: xjob, chat: "spoold-crash", s: fs, state: spool.Done})

	for _, c := range cases {
		checkEnded(t, c)
	}
	spooldCheckTree(t, s)
	spooldCheckTree(t, ss)
	spooldCheckTree(t, ds)
	spooldCheckTree(t, fs)
}

// spoolIn runs `spool --spool dir args...` with stdin and returns what it
// printed, trimmed.
func spoolIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := command(spooldEnv(), "spool", append([]string{"--spool", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("spool %q: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// endWatcher is a watcher of chat w: `watchd follow --json`, or the Python
// client's follow (which runs watchd follow), with the job id or without.
type endWatcher struct {
	name string
	p    *proc
}

// endWatch starts a watcher; with ready, it returns once the watcher (the
// watchd process, the Python client's child) has its inotify instance: its
// start, which it stamps first of all, is behind it.
func endWatch(t *testing.T, dir, chat, job string, python, ready bool) *endWatcher {
	t.Helper()
	var p *proc
	name := "watchd follow"
	if python {
		name = "vmspool.follow"
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("no python3 for the Python client's follow")
		}
		code := `import json, sys
sys.path.insert(0, sys.argv[1])
import vmspool
for ev in vmspool.follow(sys.argv[3], sys.argv[4] or None, spool=sys.argv[2], timeout=60):
    print(json.dumps({"vmspool": {"kind": ev.kind, "job": ev.job, "state": ev.state}}), flush=True)`
		p = startPath(t, raceEnv(), "python3", py, "-c", code, filepath.Join("..", "clients", "python"), dir, chat, job)
	} else {
		args := []string{"follow", "--spool", dir, "--chat", chat, "--json", "--timeout", "60s"}
		if job != "" {
			args = append(args, "--job", job)
		}
		p = startProc(t, raceEnv(), "watchd", args...)
	}
	if job != "" {
		name += " --job"
	}
	w := &endWatcher{name: name, p: p}
	if ready {
		pid := p.cmd.Process.Pid
		if python {
			eventually(t, 10*time.Second, 2*time.Millisecond, name+"'s watchd", func() bool {
				pid = childNamed(p.cmd.Process.Pid, "watchd")
				return pid > 0
			})
		}
		watchdWaitWatching(t, pid)
	}
	return w
}

// lines are the watcher's lines: each output's job and kind and, for the
// end, its state.
func (w *endWatcher) lines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(w.p.logText()), "\n") {
		var v struct {
			Run struct{ Kind, Job, State string } `json:"vmspool"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("%s: a line that is not an event: %q", w.name, line)
			continue
		}
		out = append(out, v.Run.Job+" "+v.Run.Kind+" "+v.Run.State)
	}
	return out
}

// ended waits for the watcher to exit and returns its last line.
func (w *endWatcher) ended(t *testing.T) string {
	t.Helper()
	select {
	case <-w.p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end: %q", w.name, w.p.logText())
	}
	l := w.lines(t)
	if len(l) == 0 {
		t.Fatalf("%s printed nothing (%v)", w.name, w.p.err)
	}
	return l[len(l)-1]
}

// childNamed is the pid of a child of parent whose command is name, or 0.
func childNamed(parent int, name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(b, ')')
		j := bytes.IndexByte(b, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if string(b[j+1:i]) == name && len(f) > 1 && f[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	return 0
}

// endClaim claims job as worker, process pid of this host, and begins
// its run as spoold would: a start event and the first document.
func endClaim(t *testing.T, s *spool.Spool, job, chat, worker string, pid int) *spool.Lease {
	t.Helper()
	host, _ := os.Hostname()
	l, _, err := s.Claim(job, spool.Lease{Worker: worker, Host: host, PID: pid, Boot: spool.BootID(), Chat: chat, LeaseS: 30})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	s.AppendEvent(job, spool.Event{Type: spool.EventStart, Text: "attempt 1 started by " + worker, Worker: worker, Attempt: l.Attempt})
	if err := s.WriteProgress(&spool.Progress{Job: job, Chat: chat, State: spool.Running, Started: l.Claimed, Attempt: l.Attempt}); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEndWatchersBetween: a run's last document lands before its result
// (invariant 7). Held between the two (spool.End's BeforeResult: the
// result waits until the hook returns), a watcher given the job reports
// the run's end from its document, before the result exists; a watcher
// without the job, started there or after the result, however soon, never
// takes that run for its own: it reports the chat's next run. Both
// watchers: `watchd follow` and the Python client's follow.
func TestEndWatchersBetween(t *testing.T) {
	dir := newSpool(t)
	s := openSpool(t, dir, 200)
	first := spooldSubmit(t, dir, "--chat", "w", "--", "true")
	l := endClaim(t, s, first, "w", "T", os.Getpid())
	var between []*endWatcher
	zero := 0
	err := s.End(spool.Ending{Result: &spool.Result{Job: first, Chat: "w", State: spool.Done, Exit: &zero, Attempt: l.Attempt, Worker: "T"},
		Lease: l, Worker: "T", BeforeResult: func() {
			if p, err := s.ReadProgress("w"); err != nil || p.Job != first || !p.Done {
				t.Fatalf("the document before the result: %+v %v", p, err)
			}
			for _, python := range []bool{false, true} {
				w := endWatch(t, dir, "w", first, python, false)
				if got := w.ended(t); got != first+" end done" {
					t.Errorf("%s, between the document and the result: ended with %q, want %q", w.name, got, first+" end done")
				}
				if st, _ := s.State(first); st != spool.Running {
					t.Errorf("the result was written before the hook returned: %s", st)
				}
			}
			for _, python := range []bool{false, true} {
				between = append(between, endWatch(t, dir, "w", "", python, true))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	after := []*endWatcher{endWatch(t, dir, "w", "", false, true), endWatch(t, dir, "w", "", true, true)}
	for _, w := range append(between, after...) {
		select {
		case <-w.p.done:
			t.Fatalf("%s ended before the next run: %q", w.name, w.lines(t))
		default:
		}
	}

	// The chat's next run, which fails.
	next := spooldSubmit(t, dir, "--chat", "w", "--", "false")
	l = endClaim(t, s, next, "w", "T", os.Getpid())
	one := 1
	if err := s.End(spool.Ending{Result: &spool.Result{Job: next, Chat: "w", State: spool.Failed, Exit: &one, Attempt: l.Attempt, Worker: "T"},
		Lease: l, Worker: "T"}); err != nil {
		t.Fatal(err)
	}
	for i, w := range append(between, after...) {
		when := []string{"between", "between", "after", "after"}[i]
		if got := w.ended(t); got != next+" end failed" {
			t.Errorf("%s started %s the document and the result: ended with %q, want the next run's %q", w.name, when, got, next+" end failed")
		}
		for _, line := range w.lines(t) {
			if strings.HasPrefix(line, first+" ") {
				t.Errorf("%s started %s: took the ended run for its own: %q", w.name, when, line)
			}
		}
	}
}
