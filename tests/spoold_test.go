package tests

// The daemon's stories, each with the real binaries in separate processes:
// spoold claims and runs, `spool submit` and the hand snippet queue, kill
// -9 and restarts happen for real, and the tree is checked the way an
// operator would check it (ls, cat).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// spooldEnv is raceEnv with SPOOLD_TEST_SECRET, which stands for what
// must not reach a job.
func spooldEnv() []string {
	return append(raceEnv(), "SPOOLD_TEST_SECRET=1")
}

// spooldStart starts spoold on dir with args.
func spooldStart(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	return startProc(t, spooldEnv(), "spoold", append([]string{"--spool", dir}, args...)...)
}

// spooldSubmit runs `spool submit` and returns the job id.
func spooldSubmit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin("spool"), append([]string{"--spool", dir, "submit"}, args...)...)
	cmd.Env = spooldEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("spool submit %q: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// spooldHandSubmit queues a job the way the hand snippet of docs/contract.md does, with
// nothing but sh and coreutils.
func spooldHandSubmit(t testing.TB, dir, id, chat, spec string) {
	t.Helper()
	script := `cd "$SPOOL_DIR" && id=$1
printf '%s' "$2" > .$id.json && mv .$id.json $id.json
rm -f progress/$3 chats/$3/answer.json
: > .$id.ready && mv .$id.ready $id.ready`
	cmd := exec.Command("sh", "-c", script, "sh", id, spec, chat)
	cmd.Env = append(spooldEnv(), "SPOOL_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hand submit: %v: %s", err, out)
	}
}

// spooldCheckTree checks what ls shows: no lease and no marker left, and
// each job in exactly one final state. It returns the count by state.
func spooldCheckTree(t testing.TB, s *spool.Spool) map[spool.State]int {
	t.Helper()
	jobs, _, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	n := map[spool.State]int{}
	for job, f := range jobs {
		if f&(spool.HasRunning|spool.HasReady) != 0 {
			t.Errorf("job %s: still has a lease or a marker (%b)", job, f)
		}
		if c := f.States(); c != 1 {
			t.Errorf("job %s: in %d states at once", job, c)
		}
		st, _ := f.State()
		n[st]++
	}
	return n
}

func spooldProgress(t testing.TB, s *spool.Spool, chat string) *spool.Progress {
	t.Helper()
	p, err := s.ReadProgress(chat)
	if err != nil {
		return nil
	}
	return p
}

// spooldFinalProgress waits for the chat's progress to say done: it is
// written right before the result.
func spooldFinalProgress(t testing.TB, s *spool.Spool, chat string) *spool.Progress {
	t.Helper()
	var p *spool.Progress
	eventually(t, 5*time.Second, 10*time.Millisecond, "progress/"+chat+" done", func() bool {
		p = spooldProgress(t, s, chat)
		return p != nil && p.Done
	})
	return p
}

func spooldEvents(t testing.TB, s *spool.Spool, job string) []spool.Event {
	t.Helper()
	evs, err := s.NewEventReader(job).Read()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func spooldHasEvent(evs []spool.Event, typ, text string) bool {
	for _, ev := range evs {
		if ev.Type == typ && strings.Contains(ev.Text, text) {
			return true
		}
	}
	return false
}

// TestSpooldEveryJobRunsOnce: 300 jobs, half from `spool submit` and half
// from the hand snippet, across 3 daemons: each runs exactly once, each
// ends in exactly one final state, and two jobs of one chat never overlap.
func TestSpooldEveryJobRunsOnce(t *testing.T) {
	dir := newSpool(t)
	work := t.TempDir()
	ran := filepath.Join(work, "ran")
	var daemons []*proc
	for i := 0; i < 3; i++ {
		daemons = append(daemons, spooldStart(t, dir, "--workers", "3", "--worker", fmt.Sprintf("w%d", i)))
	}
	s := openSpool(t, dir, 200)
	const n, chats = 300, 40
	// Each job appends its id, and its start and end under its chat, to one
	// file: O_APPEND writes of a line land whole and in order.
	body := `echo "s $SPOOL_CHAT $SPOOL_JOB" >> "$0"; echo "$SPOOL_JOB" >> "$0"; echo "e $SPOOL_CHAT $SPOOL_JOB" >> "$0"`
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				chat := fmt.Sprintf("c%d", i%chats)
				var id string
				if i%2 == 0 {
					id = spooldSubmit(t, dir, "--chat", chat, "--", "sh", "-c", body, ran)
				} else {
					id = fmt.Sprintf("hand-%03d", i)
					spec, _ := json.Marshal(map[string]any{"chat": chat, "argv": []string{"sh", "-c", body, ran}})
					spooldHandSubmit(t, dir, id, chat, string(spec))
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	for _, id := range ids {
		if r := waitEnd(t, s, id, 90*time.Second, 10*time.Millisecond); r.State != spool.Done {
			t.Errorf("job %s ended %s: %v", id, r.State, r.Error)
		}
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	open := map[string]string{} // chat -> job running
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1:
			count[f[0]]++
		case f[0] == "s":
			if j, busy := open[f[1]]; busy {
				t.Errorf("chat %s: job %s started while %s ran", f[1], f[2], j)
			}
			open[f[1]] = f[2]
		case f[0] == "e":
			delete(open, f[1])
		}
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("job %s ran %d times", id, count[id])
		}
	}
	if len(count) != n {
		t.Errorf("%d distinct jobs ran, want %d", len(count), n)
	}
	// A result is written before its lease is removed: the tree is checked
	// once the daemons are done with it.
	for _, d := range daemons {
		d.stop(t, 20*time.Second)
	}
	if got := spooldCheckTree(t, s); got[spool.Done] != n {
		t.Errorf("final states %v, want %d done", got, n)
	}
}

// TestSpooldKill9Recovery: spoold is killed with -9 while it runs jobs; its
// jobs' processes live on as orphans. The next spoold recovers each job
// per its attempts, ends the orphans before any new attempt starts, and
// leaves nothing running.
// TestSpooldProgressBeforeStart: the chat's progress names the job before
// the job's first instruction runs. A spoold killed at any moment after
// the start thus leaves a document of the job, into which the recoverer
// may write its end (it writes only into a document naming the job: a
// missing one may be a newer submission's clearing, invariant 6). The job
// itself reads the document, so this holds or fails whatever the timing.
func TestSpooldProgressBeforeStart(t *testing.T) {
	dir := newSpool(t)
	out := filepath.Join(t.TempDir(), "seen")
	d := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	for i := 0; i < 5; i++ {
		chat := fmt.Sprintf("pb%d", i)
		job := spooldSubmit(t, dir, "--chat", chat, "--", "bash", "-c", `cat "$1" > "$2" 2>&1; exit 0`, "_",
			filepath.Join(dir, spool.ProgressPath(chat)), out)
		if r := waitEnd(t, s, job, 20*time.Second, 5*time.Millisecond); r.State != spool.Done {
			t.Fatalf("job %s: %s, want done", job, r.State)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var p spool.Progress
		if err := json.Unmarshal(b, &p); err != nil || p.Job != job || p.State != spool.Running || p.Done {
			t.Fatalf("job %s found at its start the progress %q (%v), want its own, running", job, b, err)
		}
	}
	d.stop(t, 10*time.Second)
}

func TestSpooldKill9Recovery(t *testing.T) {
	dir := newSpool(t)
	work := t.TempDir()
	trace := filepath.Join(work, "trace")
	a := spooldStart(t, dir, "--workers", "4", "--lease", "2s", "--kill-grace", "2s", "--worker", "A")
	s := openSpool(t, dir, 200)
	// The first attempt traps TERM, records its end, and is slow to go;
	// the second one finishes at once.
	body := `now() { date +%s.%N; }
echo "start $SPOOL_JOB $SPOOL_ATTEMPT $(now)" >> "$0"
if [ "$SPOOL_ATTEMPT" = 1 ]; then
  trap 'sleep 0.3; echo "end $SPOOL_JOB $SPOOL_ATTEMPT $(now)" >> "$0"; exit 143' TERM
  sleep 60 & wait
fi
echo "end $SPOOL_JOB $SPOOL_ATTEMPT $(now)" >> "$0"`
	var retried []string
	for i := 0; i < 3; i++ {
		retried = append(retried, spooldSubmit(t, dir, "--chat", fmt.Sprintf("k%d", i), "--attempts", "2", "--", "bash", "-c", body, trace))
	}
	once := spooldSubmit(t, dir, "--chat", "k9", "--", "bash", "-c", body, trace)
	all := append(append([]string{}, retried...), once)
	eventually(t, 20*time.Second, 10*time.Millisecond, "4 jobs to start", func() bool {
		b, _ := os.ReadFile(trace)
		return bytes.Count(b, []byte("start ")) == 4
	})
	a.kill()
	for _, job := range all {
		if st, _ := s.State(job); st != spool.Running {
			t.Fatalf("job %s is %s after kill -9, want running (its lease left behind)", job, st)
		}
		if held, _ := s.SpecLocked(job); !held {
			t.Fatalf("job %s: its orphaned processes should still hold the spec lock", job)
		}
	}
	// As if A had died between starting a job and recording its process
	// group: the recoverer must find the orphans by the locks they hold.
	for _, job := range []string{retried[0], once} {
		spooldEditLease(t, s, job, func(m map[string]any) { delete(m, "pgid") })
	}
	b := spooldStart(t, dir, "--workers", "4", "--lease", "2s", "--kill-grace", "2s", "--worker", "B")
	for _, job := range retried {
		r := waitEnd(t, s, job, 30*time.Second, 10*time.Millisecond)
		if r.State != spool.Done || r.Attempt != 2 {
			t.Errorf("job %s: %s at attempt %d, want done at attempt 2 (%v)", job, r.State, r.Attempt, r.Error)
		}
		evs := spooldEvents(t, s, job)
		if !spooldHasEvent(evs, spool.EventWorker, "worker A died; queued again (attempt 2 of 2)") {
			t.Errorf("job %s: no worker event about the recovery: %+v", job, evs)
		}
	}
	r := waitEnd(t, s, once, 30*time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || *r.Error != "worker A died" {
		t.Errorf("job %s: %s %v, want failed \"worker A died\"", once, r.State, r.Error)
	}
	p := spooldFinalProgress(t, s, "k9")
	if p == nil || !p.Done || p.State != spool.Failed || p.Error == nil || !strings.Contains(*p.Error, "worker A died") {
		t.Errorf("progress of k9: %+v, want done, failed, worker A died", p)
	}
	b.stop(t, 20*time.Second)
	spooldCheckTree(t, s)

	// Each attempt recorded its start and its end, and no attempt started
	// before the one before had ended.
	type span struct{ start, end float64 }
	spans := map[string]map[int]*span{}
	f, _ := os.Open(trace)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) != 4 {
			t.Fatalf("trace line %q", sc.Text())
		}
		at, _ := strconv.Atoi(w[2])
		ts, _ := strconv.ParseFloat(w[3], 64)
		if spans[w[1]] == nil {
			spans[w[1]] = map[int]*span{}
		}
		sp := spans[w[1]][at]
		if sp == nil {
			sp = &span{}
			spans[w[1]][at] = sp
		}
		if w[0] == "start" {
			sp.start = ts
		} else {
			sp.end = ts
		}
	}
	for _, job := range retried {
		s1, s2 := spans[job][1], spans[job][2]
		if s1 == nil || s2 == nil || s1.end == 0 || s2.start == 0 || s2.end == 0 {
			t.Errorf("job %s: attempts %+v %+v, want both started and ended", job, s1, s2)
			continue
		}
		if s2.start < s1.end {
			t.Errorf("job %s: attempt 2 started at %.3f, before attempt 1 ended at %.3f", job, s2.start, s1.end)
		}
	}
	if sp := spans[once][1]; sp == nil || sp.end == 0 {
		t.Errorf("job %s: its orphan was not ended (%+v)", once, sp)
	}
}

// spooldEditLease rewrites a lease in place, the way a crash at the wrong
// moment could have left it.
func spooldEditLease(t testing.TB, s *spool.Spool, job string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(s.Path(job + ".running"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	tmp := s.Path("." + job + ".running.edit")
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.Path(job+".running")); err != nil {
		t.Fatal(err)
	}
}

// TestSpooldEnds: timeout, cancel of a running and of a queued job, a job
// that prints 10 MB, a missing program.
func TestSpooldEnds(t *testing.T) {
	dir := newSpool(t)
	d := spooldStart(t, dir, "--workers", "4", "--kill-grace", "1s")
	s := openSpool(t, dir, 200)

	timeout := spooldSubmit(t, dir, "--chat", "t", "--timeout", "1s", "--", "sleep", "30")
	running := spooldSubmit(t, dir, "--chat", "c", "--", "sleep", "30")
	queued := spooldSubmit(t, dir, "--chat", "c", "--", "sh", "-c", "echo should not run; exit 3")
	big := spooldSubmit(t, dir, "--chat", "b", "--", "sh", "-c", "head -c 10485760 /dev/zero | tr '\\0' x")
	missing := spooldSubmit(t, dir, "--chat", "m", "--", "no-such-program-here")
	// A job that leaves a process behind in its group: it is ended with
	// the job, so the chat's next job runs.
	leaves := spooldSubmit(t, dir, "--chat", "bg", "--", "sh", "-c", "sleep 60 & echo left a sleeper")
	next := spooldSubmit(t, dir, "--chat", "bg", "--", "true")

	eventually(t, 10*time.Second, 10*time.Millisecond, "the job to run", func() bool {
		st, _ := s.State(running)
		return st == spool.Running
	})
	if st, _ := s.State(queued); st != spool.Queued {
		t.Fatalf("second job of a busy chat is %s, want queued", st)
	}
	for _, job := range []string{queued, running} {
		if out, err := command(spooldEnv(), "spool", "--spool", dir, "cancel", job).CombinedOutput(); err != nil {
			t.Fatalf("spool cancel: %v: %s", err, out)
		}
	}
	if r := waitEnd(t, s, running, 10*time.Second, 10*time.Millisecond); r.State != spool.Cancelled {
		t.Errorf("cancelled job ended %s", r.State)
	}
	if r := waitEnd(t, s, queued, 10*time.Second, 10*time.Millisecond); r.State != spool.Cancelled {
		t.Errorf("cancelled queued job ended %s", r.State)
	}
	if b, _ := os.ReadFile(s.Path(queued + ".log")); len(b) > 0 {
		t.Errorf("a job cancelled while queued ran: %q", b)
	}
	r := waitEnd(t, s, timeout, 10*time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || *r.Error != "timed out after 1s" {
		t.Errorf("timeout: %s %v", r.State, r.Error)
	}
	if p := spooldFinalProgress(t, s, "t"); p == nil || !p.Done || p.State != spool.Failed {
		t.Errorf("progress of a timed out job: %+v", p)
	}
	if r := waitEnd(t, s, big, 30*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("10 MB job: %s %v", r.State, r.Error)
	}
	if fi, err := os.Stat(s.Path(big + ".log")); err != nil || fi.Size() != 10<<20 {
		t.Errorf("10 MB job's log: %v %v", fi.Size(), err)
	}
	r = waitEnd(t, s, missing, 10*time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "not found") {
		t.Errorf("missing program: %s %v", r.State, r.Error)
	}
	if r := waitEnd(t, s, leaves, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("job that left a process: %s %v", r.State, r.Error)
	}
	if held, _ := s.SpecLocked(leaves); held {
		t.Errorf("the process the job left behind still runs")
	}
	if r := waitEnd(t, s, next, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("the chat's next job: %s %v", r.State, r.Error)
	}
	p := spooldFinalProgress(t, s, "c")
	// The chat's last word is either job's, both cancelled: the queued
	// one writes it too if the chat is free by then.
	if p == nil || (p.Job != running && p.Job != queued) || !p.Done || p.State != spool.Cancelled {
		t.Errorf("progress of the cancelled chat: %+v", p)
	}
	d.stop(t, 10*time.Second)
	spooldCheckTree(t, s)
}

// TestSpooldQuestion: a question sets the progress waiting; a stale answer
// (another question id) is ignored; the matching answer becomes an answer
// event, the state running again, and `spool ask` in the job returns it.
// The job then asks its next question at once: each question has exactly
// one answer event, whether spoold's relay or `spool ask` wrote it (either
// may read the answer first; TestSpooldQuestionRelayLate, the relay too late).
func TestSpooldQuestion(t *testing.T) {
	dir := newSpool(t)
	out := filepath.Join(t.TempDir(), "out")
	spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "q", "--", "sh", "-c", `a=$(spool ask --options yes,no "Deploy?") && b=$(spool ask "Why?") && echo "got $a $b" > "$0"`, out)
	var p *spool.Progress
	eventually(t, 15*time.Second, 10*time.Millisecond, "the question", func() bool {
		p = spooldProgress(t, s, "q")
		return p != nil && p.State == spool.Waiting && p.Question != nil
	})
	if p.Question.Text != "Deploy?" || len(p.Question.Options) != 2 {
		t.Errorf("question: %+v", p.Question)
	}
	if err := s.WriteAnswer("q", &spool.Answer{Job: job, Question: "not-" + p.Question.ID, Answer: "stale"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a window in which it must not be taken
	if p2 := spooldProgress(t, s, "q"); p2.State != spool.Waiting || p2.Question == nil {
		t.Fatalf("a stale answer was taken: %+v", p2)
	}
	if st, _ := s.State(job); st != spool.Running {
		t.Fatalf("job is %s while a stale answer is there", st)
	}
	if o, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "q", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, o)
	}
	first := p.Question.ID
	eventually(t, 15*time.Second, 10*time.Millisecond, "the next question", func() bool {
		p = spooldProgress(t, s, "q")
		return p != nil && p.Question != nil && p.Question.Text == "Why?"
	})
	if o, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "q", "because").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, o)
	}
	if r := waitEnd(t, s, job, 15*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Fatalf("job ended %s %v", r.State, r.Error)
	}
	if b, _ := os.ReadFile(out); string(b) != "got yes because\n" {
		t.Errorf("spool ask returned %q", b)
	}
	if got, want := spoolAnswerEvents(t, s, job), first+"=yes "+p.Question.ID+"=because"; got != want {
		t.Errorf("answer events %q, want %q", got, want)
	}
	if p := spooldFinalProgress(t, s, "q"); p == nil || !p.Done || p.Question != nil || p.State != spool.Done {
		t.Errorf("final progress: %+v", p)
	}
}

// TestSpooldQuestionRelayLate: spoold reads answer.json only after the job
// has taken the answer and asked its next question, and a submission of
// the chat has cleared the file meanwhile (docs/contract.md, invariant 6):
// the first answer's event is the one `spool ask` appended itself. Before
// ask appended it, the job's events held no answer to its first question.
// spoold is stopped (SIGSTOP) to be late; that is the point of the test.
func TestSpooldQuestionRelayLate(t *testing.T) {
	dir := newSpool(t)
	out := filepath.Join(t.TempDir(), "out")
	d := spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "q", "--", "sh", "-c", `a=$(spool ask "One?") && b=$(spool ask "Two?") && echo "got $a $b" > "$0"`, out)
	var p *spool.Progress
	eventually(t, 15*time.Second, 10*time.Millisecond, "the first question", func() bool {
		p = spooldProgress(t, s, "q")
		return p != nil && p.Question != nil && p.Question.Text == "One?"
	})
	first := p.Question.ID
	d.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			d.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	if o, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "q", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, o)
	}
	var second string
	eventually(t, 15*time.Second, 10*time.Millisecond, "the job's next question", func() bool {
		for _, ev := range spooldEvents(t, s, job) {
			if ev.Type == spool.EventQuestion && ev.Text == "Two?" {
				second = ev.ID
			}
		}
		return second != ""
	})
	next := spooldSubmit(t, dir, "--chat", "q", "--", "true")
	if _, err := s.ReadAnswer("q"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("answer.json after a submission: %v", err)
	}
	d.cmd.Process.Signal(syscall.SIGCONT)
	stopped = false
	eventually(t, 15*time.Second, 10*time.Millisecond, "the second question", func() bool {
		p = spooldProgress(t, s, "q")
		return p != nil && p.Job == job && p.Question != nil && p.Question.ID == second
	})
	if o, err := command(spooldEnv(), "spool", "--spool", dir, "answer", "--chat", "q", "because").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, o)
	}
	if r := waitEnd(t, s, job, 15*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Fatalf("job ended %s %v", r.State, r.Error)
	}
	if b, _ := os.ReadFile(out); string(b) != "got yes because\n" {
		t.Errorf("the job got %q", b)
	}
	if got, want := spoolAnswerEvents(t, s, job), first+"=yes "+second+"=because"; got != want {
		t.Errorf("answer events %q, want %q", got, want)
	}
	for _, ev := range spooldEvents(t, s, job) {
		if ev.Type == spool.EventAnswer && (ev.Worker == "" || ev.Attempt != 1) {
			t.Errorf("an answer event names no worker or attempt, as the relay's do: %+v", ev)
		}
	}
	waitEnd(t, s, next, 15*time.Second, 10*time.Millisecond)
}

// TestSpooldBadInput: a refused script whose side effect never happens, a
// spec that does not parse, a spec that names nothing to run, an events
// file with a 1 MB line and invalid UTF-8; the daemon keeps serving.
func TestSpooldBadInput(t *testing.T) {
	dir := newSpool(t)
	work := t.TempDir()
	side := filepath.Join(work, "side-effect")
	d := spooldStart(t, dir, "--workers", "2")
	s := openSpool(t, dir, 200)

	script := filepath.Join(work, "s.sh")
	os.WriteFile(script, []byte("touch "+side+"\ngit commit -am 'from the VM'\n"), 0o644)
	refused := spooldSubmit(t, dir, "--chat", "g", "--script", script)

	spooldHandSubmit(t, dir, "garbage", "x", `{"chat": "x", "argv": [`)
	spooldHandSubmit(t, dir, "nothing", "y", `{"chat": "y"}`)
	weird := spooldSubmit(t, dir, "--chat", "w", "--", "sh", "-c",
		`head -c 1048576 /dev/zero | tr '\0' a >> "$SPOOL_EVENTS"; echo >> "$SPOOL_EVENTS"; printf 'bad \377\376 utf8\n' >> "$SPOOL_EVENTS"; echo last line >> "$SPOOL_EVENTS"`)

	r := waitEnd(t, s, refused, 10*time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "vmgate refused") {
		t.Errorf("refused script: %s %v", r.State, r.Error)
	}
	if _, err := os.Stat(side); err == nil {
		t.Errorf("a refused script's side effect happened")
	}
	if evs := spooldEvents(t, s, refused); !spooldHasEvent(evs, spool.EventGate, "vmgate refused") {
		t.Errorf("no gate event: %+v", evs)
	}
	for _, job := range []string{"garbage", "nothing"} {
		r := waitEnd(t, s, job, 10*time.Second, 10*time.Millisecond)
		if r.State != spool.Failed || r.Error == nil {
			t.Errorf("bad spec %s: %s %v", job, r.State, r.Error)
		}
	}
	if p := spooldFinalProgress(t, s, "y"); p == nil || !p.Done || p.State != spool.Failed {
		t.Errorf("progress of a spec without argv: %+v", p)
	}
	if r := waitEnd(t, s, weird, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("weird events job: %s %v", r.State, r.Error)
	}
	p := spooldFinalProgress(t, s, "w")
	if p == nil || !p.Done {
		t.Fatalf("weird events progress: %+v", p)
	}
	if !spooldHasEvent(p.Events, spool.EventStatus, "too long") || !spooldHasEvent(p.Events, spool.EventStatus, "bad \uFFFD") ||
		!spooldHasEvent(p.Events, spool.EventStatus, "last line") {
		t.Errorf("weird events in progress: %+v", p.Events)
	}
	// Still serving.
	ok := spooldSubmit(t, dir, "--chat", "z", "--", "true")
	if r := waitEnd(t, s, ok, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("after bad input: %s", r.State)
	}
	d.stop(t, 10*time.Second)
	spooldCheckTree(t, s)
}

// TestSpooldChatOneAtATime: two daemons, several jobs of one chat that
// each take a while: their runs never overlap, and they run in order,
// whether the jobs come one by one to daemons that serve, or wait queued
// for daemons that start, the first with a spec of 3 MiB (a field no
// reader knows): each daemon's workers then take several of the chat's
// jobs at once, and the first job's is read last. A later job whose spec
// was read first went first (in 1 run of 20 of the first case, and in
// every run of the second).
func TestSpooldChatOneAtATime(t *testing.T) {
	script := `echo "s $SPOOL_JOB" >> "$0"; sleep 0.2; echo "e $SPOOL_JOB" >> "$0"`
	for _, queuedFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "serving", true: "queued-first"}[queuedFirst], func(t *testing.T) {
			dir := newSpool(t)
			trace := filepath.Join(t.TempDir(), "trace")
			start := func() {
				spooldStart(t, dir, "--workers", "3")
				spooldStart(t, dir, "--workers", "3")
			}
			var ids []string
			if queuedFirst {
				for i := 0; i < 5; i++ {
					spec, _ := json.Marshal(map[string]any{"chat": "one", "argv": []string{"sh", "-c", script, trace},
						"padding": strings.Repeat("x", map[bool]int{true: 3 << 20}[i == 0])})
					id := fmt.Sprintf("job%d", i)
					for _, f := range []struct{ name, body string }{{id + ".json", string(spec)}, {id + ".ready", ""}} {
						if err := os.WriteFile(filepath.Join(dir, "."+f.name), []byte(f.body), 0o640); err != nil {
							t.Fatal(err)
						}
						if err := os.Rename(filepath.Join(dir, "."+f.name), filepath.Join(dir, f.name)); err != nil {
							t.Fatal(err)
						}
					}
					ids = append(ids, id)
				}
			}
			start()
			for i := 0; len(ids) < 5; i++ {
				ids = append(ids, spooldSubmit(t, dir, "--chat", "one", "--", "sh", "-c", script, trace))
			}
			s := openSpool(t, dir, 200)
			for _, id := range ids {
				waitEnd(t, s, id, 20*time.Second, 10*time.Millisecond)
			}
			b, _ := os.ReadFile(trace)
			var want []string
			for _, id := range ids {
				want = append(want, "s "+id, "e "+id)
			}
			if got := strings.Split(strings.TrimSpace(string(b)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("runs of one chat overlapped or ran out of order (queued: %s):\n%s", strings.Join(ids, " "), b)
			}
		})
	}
}

// TestSpooldShutdown: SIGTERM lets a short job finish; a long one is
// ended after the grace and queued again (attempts left) or ended failed;
// spoold exits 0. A second signal does not wait for the grace.
func TestSpooldShutdown(t *testing.T) {
	dir := newSpool(t)
	d := spooldStart(t, dir, "--workers", "3", "--grace", "1s", "--kill-grace", "500ms")
	s := openSpool(t, dir, 200)
	short := spooldSubmit(t, dir, "--chat", "a", "--", "sleep", "0.5")
	again := spooldSubmit(t, dir, "--chat", "b", "--attempts", "3", "--", "sleep", "30")
	last := spooldSubmit(t, dir, "--chat", "c", "--", "sleep", "30")
	eventually(t, 10*time.Second, 10*time.Millisecond, "three jobs running", func() bool {
		n := 0
		for _, j := range []string{short, again, last} {
			if st, _ := s.State(j); st == spool.Running {
				n++
			}
		}
		return n == 3
	})
	d.stop(t, 10*time.Second)
	if st, _ := s.State(short); st != spool.Done {
		t.Errorf("short job is %s after a graceful stop", st)
	}
	if st, _ := s.State(again); st != spool.Queued {
		t.Errorf("interrupted job with attempts left is %s, want queued", st)
	}
	if m, err := s.ReadMarker(again); err != nil || m.Attempt != 2 {
		t.Errorf("marker of the interrupted job: %+v %v", m, err)
	}
	if p := spooldProgress(t, s, "b"); p == nil || p.State != spool.Queued || p.Done {
		t.Errorf("progress of the interrupted job: %+v", p)
	}
	r := waitEnd(t, s, last, time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || *r.Error != "interrupted by shutdown" {
		t.Errorf("interrupted job without attempts: %s %v", r.State, r.Error)
	}

	// The second signal: no waiting for the 1 minute grace.
	d2 := spooldStart(t, dir, "--grace", "1m", "--kill-grace", "30s")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the queued job to run again", func() bool {
		st, _ := s.State(again)
		return st == spool.Running
	})
	d2.cmd.Process.Signal(syscall.SIGTERM)
	// The second signal once the first was taken (two of the same sent at
	// once may reach the process as one).
	eventually(t, 10*time.Second, 10*time.Millisecond, "the first signal to be taken", func() bool {
		return strings.Contains(d2.logText(), "stopping after the grace")
	})
	began := time.Now()
	d2.stop(t, 10*time.Second)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("second signal: exit took %v", took)
	}
	if st, _ := s.State(again); st != spool.Queued {
		t.Errorf("after the second signal the job is %s, want queued", st)
	}
}

// TestSpooldCommand: the command's own surface.
func TestSpooldCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, 0, "usage: spoold"},
		{[]string{"--version"}, 0, "spoold"},
		{[]string{"--workers", "0"}, 2, "--workers"},
		{[]string{"--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"--spool", "/proc/no/such/spool"}, 1, "spoold: spool /proc/no/such/spool"},
		{[]string{"extra"}, 2, "unexpected argument"},
	} {
		out, err := command(spooldEnv(), "spoold", tc.args...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(string(out), tc.out) {
			t.Errorf("spoold %q: exit %d, %q; want exit %d with %q", tc.args, code, out, tc.code, tc.out)
		}
		if tc.code != 0 && strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("spoold %q: error is not one line: %q", tc.args, out)
		}
	}
}

// TestSpooldPoll: with --poll (no inotify), jobs are claimed, their events
// relayed, a cancel seen, a chat's waiting job run after the first ends.
func TestSpooldPoll(t *testing.T) {
	dir := newSpool(t)
	spooldStart(t, dir, "--poll", "50ms", "--workers", "2", "--kill-grace", "500ms")
	s := openSpool(t, dir, 200)
	first := spooldSubmit(t, dir, "--chat", "p", "--", "sh", "-c", `echo "working" >> "$SPOOL_EVENTS"; sleep 0.3`)
	second := spooldSubmit(t, dir, "--chat", "p", "--", "true")
	long := spooldSubmit(t, dir, "--chat", "l", "--", "sleep", "30")
	if r := waitEnd(t, s, first, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("first: %s", r.State)
	}
	if evs := spooldEvents(t, s, first); !spooldHasEvent(evs, spool.EventStatus, "working") {
		t.Errorf("events: %+v", evs)
	}
	if r := waitEnd(t, s, second, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Errorf("second: %s", r.State)
	}
	eventually(t, 10*time.Second, 10*time.Millisecond, "the long job to run", func() bool {
		st, _ := s.State(long)
		return st == spool.Running
	})
	if err := s.RequestCancel(long, "test"); err != nil {
		t.Fatal(err)
	}
	if r := waitEnd(t, s, long, 10*time.Second, 10*time.Millisecond); r.State != spool.Cancelled {
		t.Errorf("cancel in poll mode: %s", r.State)
	}
}

// TestSpooldLeaseLost: a daemon whose lease was taken over stops its job
// and writes nothing of it; the taker's lease, once stale, is recovered.
func TestSpooldLeaseLost(t *testing.T) {
	dir := newSpool(t)
	d := spooldStart(t, dir, "--lease", "1s", "--kill-grace", "500ms", "--worker", "A")
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "x", "--", "sleep", "30")
	eventually(t, 10*time.Second, 10*time.Millisecond, "the job to run", func() bool {
		held, _ := s.SpecLocked(job)
		return held
	})
	// The thief: another worker of this host, whose process has since
	// died (on its own host a lease is judged by its process).
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	spooldEditLease(t, s, job, func(m map[string]any) { m["worker"], m["pid"] = "thief", gone.Process.Pid })
	eventually(t, 10*time.Second, 10*time.Millisecond, "the job's processes to end", func() bool {
		held, _ := s.SpecLocked(job)
		return !held
	})
	if !strings.Contains(d.logText(), "lease lost") {
		t.Errorf("no lease lost line in the log")
	}
	r := waitEnd(t, s, job, 15*time.Second, 10*time.Millisecond)
	if r.State != spool.Failed || r.Error == nil || *r.Error != "worker thief died" {
		t.Errorf("after the taker died: %s %v", r.State, r.Error)
	}
	// The holder that lost the lease wrote no end of its own; the
	// recoverer's end is the only one.
	evs := spooldEvents(t, s, job)
	ends := 0
	for _, ev := range evs {
		if ev.Type == spool.EventEnd {
			ends++
		}
	}
	if last := evs[len(evs)-1]; ends != 1 || last.Type != spool.EventEnd || last.Text != "failed: worker thief died" {
		t.Errorf("events: %+v; want one end, the recoverer's, last", evs)
	}
	d.stop(t, 10*time.Second)
	spooldCheckTree(t, s)
}

// TestSpooldProgressKeepalive: a running job's document is rewritten even
// when nothing happens, so a watcher is never left without news; seq does
// not move without an event.
func TestSpooldProgressKeepalive(t *testing.T) {
	dir := newSpool(t)
	spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "k", "--", "sleep", "7")
	var first *spool.Progress
	eventually(t, 10*time.Second, 10*time.Millisecond, "the first document", func() bool {
		first = spooldProgress(t, s, "k")
		return first != nil && first.Job == job && first.State == spool.Running
	})
	var later *spool.Progress
	eventually(t, 8*time.Second, 10*time.Millisecond, "a newer document without events", func() bool {
		later = spooldProgress(t, s, "k")
		return later != nil && later.Updated > first.Updated
	})
	if later.Seq != first.Seq || later.Done {
		t.Errorf("keepalive document moved: %+v -> %+v", first, later)
	}
}

// TestSpooldOtherHostWaits: a worker of another host (--host) cannot see
// the dead worker's processes: it takes the job over only once the
// heartbeat is older than the lease, and starts the next attempt only once
// the old attempt's processes have let go of the spec's lock.
func TestSpooldOtherHostWaits(t *testing.T) {
	dir := newSpool(t)
	trace := filepath.Join(t.TempDir(), "trace")
	a := spooldStart(t, dir, "--lease", "1s", "--host", "h1", "--worker", "A")
	s := openSpool(t, dir, 200)
	body := `now() { date +%s.%N; }
echo "start $SPOOL_ATTEMPT $(now)" >> "$0"
[ "$SPOOL_ATTEMPT" = 1 ] && sleep 2.5
echo "end $SPOOL_ATTEMPT $(now)" >> "$0"`
	job := spooldSubmit(t, dir, "--chat", "o", "--attempts", "2", "--", "bash", "-c", body, trace)
	eventually(t, 10*time.Second, 10*time.Millisecond, "the first attempt", func() bool {
		b, _ := os.ReadFile(trace)
		return bytes.Contains(b, []byte("start 1"))
	})
	a.kill()
	spooldStart(t, dir, "--lease", "1s", "--host", "h2", "--worker", "B")
	r := waitEnd(t, s, job, 20*time.Second, 10*time.Millisecond)
	if r.State != spool.Done || r.Attempt != 2 || r.Worker != "B" {
		t.Fatalf("job: %s attempt %d by %s, want done at attempt 2 by B", r.State, r.Attempt, r.Worker)
	}
	b, _ := os.ReadFile(trace)
	ts := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[2], 64)
		ts[f[0]+" "+f[1]] = v
	}
	if ts["end 1"] == 0 || ts["start 2"] < ts["end 1"] {
		t.Errorf("attempt 2 did not wait for attempt 1's processes:\n%s", b)
	}
}

// TestSpooldEnvironment: a job gets a clean environment (PATH and a few
// more from spoold, the spec's env, the SPOOL_* variables, nothing else of
// spoold's), its cwd, /dev/null as stdin, and the locks as fds 3 and 4;
// a cwd that does not exist ends it failed.
func TestSpooldEnvironment(t *testing.T) {
	dir := newSpool(t)
	work := t.TempDir()
	out := filepath.Join(work, "env")
	spooldStart(t, dir)
	s := openSpool(t, dir, 200)
	job := spooldSubmit(t, dir, "--chat", "e", "--cwd", work, "--env", "GREETING=hi there", "--", "sh", "-c",
		`{ env; echo "cwd=$(pwd)"; [ -t 0 ] || read -r x || echo "stdin=empty"; [ -e /proc/self/fd/3 ] && echo "fd3=yes"; [ -e /proc/self/fd/4 ] && echo "fd4=yes"; } > "$0"`, out)
	if r := waitEnd(t, s, job, 10*time.Second, 10*time.Millisecond); r.State != spool.Done {
		t.Fatalf("job: %s %v", r.State, r.Error)
	}
	b, _ := os.ReadFile(out)
	got := string(b)
	for _, want := range []string{"GREETING=hi there", "SPOOL_JOB=" + job, "SPOOL_CHAT=e", "SPOOL_ATTEMPT=1",
		"SPOOL_DIR=" + dir, "SPOOL_EVENTS=" + filepath.Join(dir, job+".events"), "PATH=", "cwd=" + work, "stdin=empty", "fd3=yes", "fd4=yes"} {
		if !strings.Contains(got, want) {
			t.Errorf("job's environment lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SPOOLD_TEST_SECRET") {
		t.Errorf("spoold's own environment leaked into the job:\n%s", got)
	}
	bad := spooldSubmit(t, dir, "--chat", "e2", "--cwd", filepath.Join(work, "no-such-dir"), "--", "true")
	if r := waitEnd(t, s, bad, 10*time.Second, 10*time.Millisecond); r.State != spool.Failed || r.Error == nil || !strings.Contains(*r.Error, "no such directory") {
		t.Errorf("missing cwd: %s %v", r.State, r.Error)
	}
}
