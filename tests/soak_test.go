package tests

// The soak test: the promise that a spool can be killed and fed work at
// the same time and still loses nothing and lies about nothing. Three
// spoold processes serve one spool while 1,000 jobs of every kind go
// through it, a loop kill -9s one of them every few seconds and restarts
// it, watchers follow some of the chats, and a reader parses every
// document of the tree as fast as it can. docs/reliability.md has the
// figures of a real run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func relStart(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startProc(t, raceEnv(), name, args...)
}

func relStartEnv(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	return startProc(t, env, name, args...)
}

// soakDuration reads SOAK: a Go duration, 60s when unset; 0 or "off" skip.
func soakDuration(t *testing.T) time.Duration {
	v := strings.TrimSpace(os.Getenv("SOAK"))
	if v == "" {
		return 60 * time.Second
	}
	if v == "off" || v == "0" {
		t.Skip("SOAK=" + v + ": soak test off")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("SOAK=%q: want a duration like 60s or 10m (0 or off to skip)", v)
	}
	if d == 0 {
		t.Skip("SOAK=0: soak test off")
	}
	return d
}

// soakKind is what a job of the soak does.
type soakKind int

const (
	soakQuick    soakKind = iota // true
	soakSay                      // a few status lines
	soakSleep                    // a short sleep
	soakTimeout                  // sleep 5 under a 1s timeout
	soakCancel                   // sleep 20, cancelled by the test
	soakQuestion                 // asks, answered by the test
)

var soakKindName = map[soakKind]string{soakQuick: "quick", soakSay: "say", soakSleep: "sleep",
	soakTimeout: "timeout", soakCancel: "cancel", soakQuestion: "question"}

type soakJob struct {
	i        int
	id       string
	chat     string
	kind     soakKind
	attempts int
	watch    bool
}

// soakPlan lays out the jobs: mostly very short, 20 timing out, 20
// cancelled, 20 asking a question, one in five with attempts 3. Chats are
// shared by four jobs each, so runs of one chat queue behind each other.
func soakPlan(n int) []*soakJob {
	jobs := make([]*soakJob, n)
	for i := range jobs {
		j := &soakJob{i: i, chat: fmt.Sprintf("c%03d", i%250), attempts: 1}
		switch k := i % 20; {
		case k < 12:
			j.kind = soakQuick
		case k < 15:
			j.kind = soakSay
		default:
			j.kind = soakSleep
		}
		switch i % 50 {
		case 3:
			j.kind = soakTimeout
		case 13:
			j.kind = soakCancel
		case 23:
			// Asked again after a kill; answered each time.
			j.kind, j.attempts = soakQuestion, 3
		}
		if i%5 == 1 {
			j.attempts = 3
		}
		j.watch = i%33 == 0
		jobs[i] = j
	}
	return jobs
}

// The job's body: every attempt records its start and its end in the
// trace (one O_APPEND write a line), also when it is ended by SIGTERM, so
// that the test can check that no two attempts of a job overlapped.
const soakPrelude = `T=$0
rec() { printf '%s %s %s %s\n' "$1" "$SPOOL_JOB" "$SPOOL_ATTEMPT" "$EPOCHREALTIME" >> "$T"; }
trap 'rec end; exit 143' TERM
rec start
`

func (j *soakJob) argv(trace string) []string {
	var body string
	switch j.kind {
	case soakQuick:
		body = "true"
	case soakSay:
		body = `spool say "step 1 of $SPOOL_JOB"; echo "a shell line" >> "$SPOOL_EVENTS"; spool say "step 2"`
	case soakSleep:
		body = fmt.Sprintf("sleep %s & wait", []string{"0.2", "0.5", "1", "1.5", "2"}[j.i%5])
	case soakTimeout, soakCancel:
		body = "sleep " + map[soakKind]string{soakTimeout: "5", soakCancel: "20"}[j.kind] + " & wait"
	case soakQuestion:
		body = `a=$(spool ask --timeout 60s --options yes,no "go on with $SPOOL_JOB?") || exit 3; spool say "answered $a"`
	}
	return []string{"bash", "-c", soakPrelude + body + "\nrec end\n", trace}
}

// soakReader parses every document in the tree, pass after pass, with the
// spool package's readers, and counts what it saw.
type soakReader struct {
	s      *spool.Spool
	passes atomic.Int64
	docs   atomic.Int64 // parsed
	events atomic.Int64 // event lines parsed
	claims atomic.Int64 // empty leases: a claim between its rename and its lease write
	gone   atomic.Int64 // renamed or removed between the listing and the read
	mu     sync.Mutex
	fails  []string
}

func (r *soakReader) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, fmt.Sprintf(format, args...))
}

func (r *soakReader) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.fails...)
}

// check sorts a read's outcome: nil is a parsed document, a name that
// vanished is the tree moving on, anything else is a failure.
func (r *soakReader) check(name string, err error) {
	switch {
	case err == nil:
		r.docs.Add(1)
	case errors.Is(err, fs.ErrNotExist):
		r.gone.Add(1)
	default:
		r.fail("%s: %v", name, err)
	}
}

var soakFinal = map[spool.State]spool.Files{spool.Done: spool.HasDone, spool.Failed: spool.HasFailed, spool.Cancelled: spool.HasCancelled}

func (r *soakReader) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		r.pass()
		r.passes.Add(1)
	}
}

func (r *soakReader) pass() {
	s := r.s
	jobs, _, err := s.Scan()
	if err != nil {
		r.fail("scan: %v", err)
		return
	}
	for job, f := range jobs {
		if f&spool.HasSpec != 0 {
			_, err := s.ReadSpec(job)
			r.check(job+".json", err)
		}
		if f&spool.HasReady != 0 {
			// A marker is empty (a submission), or holds the lease of a
			// recovered attempt or the result of a requeued job.
			b, err := os.ReadFile(s.Path(job + spool.ExtReady))
			if err == nil && len(bytes.TrimSpace(b)) > 0 && !json.Valid(b) {
				err = fmt.Errorf("marker holds %q", b)
			}
			r.check(job+".ready", err)
		}
		if f&spool.HasRunning != 0 {
			_, fi, err := s.ReadLease(job)
			if errors.Is(err, spool.ErrCorrupt) && fi != nil && fi.Size() == 0 {
				r.claims.Add(1)
			} else {
				r.check(job+".running", err)
			}
		}
		for st, bit := range soakFinal {
			if f&bit != 0 {
				_, err := s.ReadResult(job, st)
				r.check(job+st.Ext(), err)
			}
		}
		if f&spool.HasRunning != 0 && f&spool.HasEvents != 0 {
			r.readEvents(job)
		}
	}
	if names, err := relNames(s, spool.ProgressDir); err == nil {
		for _, n := range names {
			if n[0] == '.' {
				continue
			}
			_, err := s.ReadProgress(n)
			r.check("progress/"+n, err)
		}
	}
	if chats, err := relNames(s, spool.ChatsDir); err == nil {
		for _, c := range chats {
			if c[0] == '.' {
				continue
			}
			_, err := s.ReadAnswer(c)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			r.check("chats/"+c+"/answer.json", err)
		}
	}
}

// readEvents checks every complete line of a running job's events: all
// the soak's writers but the shell's plain line write JSON. A last line
// without its newline is a write under way (a line that crosses a page may
// be seen half-copied), and is left for the next pass, as EventReader
// does.
func (r *soakReader) readEvents(job string) {
	b, err := os.ReadFile(r.s.Path(job + spool.ExtEvents))
	if err != nil {
		return
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	} else {
		return
	}
	for n, line := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("{")) && !json.Valid(line) {
			r.fail("%s.events line %d: not JSON: %q", job, n+1, line)
			continue
		}
		if ev := spool.ParseEventLine(line, int64(n+1)); ev.Type == "" {
			r.fail("%s.events line %d: no type", job, n+1)
			continue
		}
		r.events.Add(1)
	}
}

func relNames(s *spool.Spool, dir string) ([]string, error) {
	return s.Names(dir, 0)
}

// soakSpan is one attempt as the trace recorded it.
type soakSpan struct {
	attempt    int
	start, end float64
}

func soakTrace(t *testing.T, path string) map[string]map[int]*soakSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spans := map[string]map[int]*soakSpan{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) != 4 {
			t.Errorf("trace line %q", sc.Text())
			continue
		}
		at, _ := strconv.Atoi(w[2])
		ts, err := strconv.ParseFloat(w[3], 64)
		if err != nil {
			t.Errorf("trace line %q: %v", sc.Text(), err)
			continue
		}
		if spans[w[1]] == nil {
			spans[w[1]] = map[int]*soakSpan{}
		}
		sp := spans[w[1]][at]
		if sp == nil {
			sp = &soakSpan{attempt: at}
			spans[w[1]][at] = sp
		}
		if w[0] == "start" {
			sp.start = ts
		} else if sp.end == 0 {
			sp.end = ts
		}
	}
	return spans
}

// soakRuns returns a job's attempts that started, by start time.
func soakRuns(m map[int]*soakSpan) []*soakSpan {
	var runs []*soakSpan
	for _, sp := range m {
		if sp.start != 0 {
			runs = append(runs, sp)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
	return runs
}

// soakStory is how a job ended and its workers' events, for a failure
// about one of its runs: a run with no recorded end was killed before its
// trap could write one, and its events say by whom and when.
func soakStory(s *spool.Spool, r *spool.Result) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; it ended %s (attempt %d, worker %s, finished %.3f)", r.State, r.Attempt, r.Worker, r.Finished)
	evs, _ := s.NewEventReader(r.Job).Read()
	for _, ev := range evs {
		if ev.Type != spool.EventStatus {
			fmt.Fprintf(&b, "\n\t%.3f %s %s: %s", ev.At, ev.Worker, ev.Type, ev.Text)
		}
	}
	return b.String()
}

// soakWatcher is one `watchd follow --json` of a job.
type soakWatcher struct {
	job  *soakJob
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	code int
}

func TestSoak(t *testing.T) {
	t.Parallel() // beside the power-loss sweeps (tests/powerloss_test.go)
	load := soakDuration(t)
	if testing.Short() {
		t.Skip("-short: no soak")
	}
	dir := newSpool(t)
	work := t.TempDir()
	trace := filepath.Join(work, "trace")
	if err := os.WriteFile(trace, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	daemonArgs := []string{"--spool", dir, "--workers", "4", "--lease", "2s", "--kill-grace", "2s",
		"--rescan", "5s", "--metrics-file", "off"}
	var dmu sync.Mutex
	daemons := make([]*proc, 3)
	for i := range daemons {
		daemons[i] = relStart(t, "spoold", daemonArgs...)
	}
	s := openSpool(t, dir, 300)
	eventually(t, 10*time.Second, 20*time.Millisecond, "the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, spool.ProgressDir))
		return err == nil
	})

	reader := &soakReader{s: s}
	stopReader := make(chan struct{})
	readerDone := make(chan struct{})
	go func() { reader.run(stopReader); close(readerDone) }()

	// The killer: every 3 to 5 s one spoold, at random, is killed with -9
	// and started again.
	var kills atomic.Int64
	stopKilling := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stopKilling:
				return
			case <-time.After(3*time.Second + rand.N(2*time.Second)):
			}
			i := rand.N(len(daemons))
			dmu.Lock()
			daemons[i].kill()
			daemons[i].quiet = true
			kills.Add(1)
			daemons[i] = relStart(t, "spoold", daemonArgs...)
			dmu.Unlock()
		}
	}()

	// The answerer: every question open in a chat of a question job gets
	// `spool answer`, whichever attempt asked it.
	plan := soakPlan(1000)
	qchats := map[string]bool{}
	for _, j := range plan {
		if j.kind == soakQuestion {
			qchats[j.chat] = true
		}
	}
	var answers atomic.Int64
	stopAnswering := make(chan struct{})
	answererDone := make(chan struct{})
	go func() {
		defer close(answererDone)
		answered := map[string]bool{}
		for {
			select {
			case <-stopAnswering:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for chat := range qchats {
				p, err := s.ReadProgress(chat)
				if err != nil || p.Done || p.Question == nil || answered[p.Question.ID] {
					continue
				}
				out, err := command(raceEnv(), "spool", "--spool", dir, "answer", "--chat", chat, "--question", p.Question.ID, "yes").CombinedOutput()
				if err == nil {
					answered[p.Question.ID] = true
					answers.Add(1)
				} else if !bytes.Contains(out, []byte("not open")) && !bytes.Contains(out, []byte("no question")) {
					t.Errorf("spool answer --chat %s: %v: %s", chat, err, out)
				}
			}
		}
	}()

	// The submitters: 1,000 jobs spread over three quarters of the load
	// phase; one in ten through `spool submit`, the rest through the same
	// library call it makes. Cancelled jobs get `spool cancel` a moment
	// after.
	var watchers []*soakWatcher
	var wmu sync.Mutex
	var cancels sync.WaitGroup
	began := time.Now()
	spread := load * 3 / 4
	var next atomic.Int64
	var subWG sync.WaitGroup
	for g := 0; g < 4; g++ {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(plan) {
					return
				}
				j := plan[i]
				if wait := time.Until(began.Add(spread * time.Duration(i) / time.Duration(len(plan)))); wait > 0 {
					time.Sleep(wait) // the point: the plan's jobs spread over the load
				}
				sp := &spool.Spec{Chat: j.chat, Argv: j.argv(trace), Attempts: j.attempts}
				if j.kind == soakTimeout {
					sp.Timeout = spool.Duration(time.Second)
				}
				if i%10 == 0 {
					args := []string{"--spool", dir, "submit", "--chat", j.chat, "--attempts", strconv.Itoa(j.attempts)}
					if j.kind == soakTimeout {
						args = append(args, "--timeout", "1s")
					}
					out, err := command(raceEnv(), "spool", append(append(args, "--"), sp.Argv...)...).Output()
					if err != nil {
						t.Errorf("spool submit: %v", err)
						continue
					}
					j.id = strings.TrimSpace(string(out))
				} else {
					id, err := s.Submit(sp)
					if err != nil {
						t.Errorf("submit: %v", err)
						continue
					}
					j.id = id
				}
				if j.watch {
					w := &soakWatcher{job: j, done: make(chan struct{})}
					w.cmd = command(raceEnv(), "watchd", "follow", "--spool", dir, "--chat", j.chat, "--job", j.id, "--json", "--timeout", (load + 3*time.Minute).String())
					w.cmd.Stdout = &w.out
					if err := w.cmd.Start(); err != nil {
						t.Errorf("watchd follow: %v", err)
					} else {
						go func() {
							w.cmd.Wait()
							w.code = w.cmd.ProcessState.ExitCode()
							close(w.done)
						}()
						wmu.Lock()
						watchers = append(watchers, w)
						wmu.Unlock()
					}
				}
				if j.kind == soakCancel {
					cancels.Add(1)
					go func(id string, after time.Duration) {
						defer cancels.Done()
						time.Sleep(after) // the point: the plan cancels a job this long after its submit
						if out, err := command(raceEnv(), "spool", "--spool", dir, "cancel", id).CombinedOutput(); err != nil {
							t.Errorf("spool cancel %s: %v: %s", id, err, out)
						}
					}(j.id, time.Duration(j.i%7)*400*time.Millisecond)
				}
			}
		}()
	}
	subWG.Wait()
	cancels.Wait()
	if rest := time.Until(began.Add(load)); rest > 0 {
		time.Sleep(rest) // the point: the kills and readers go on for the whole load
	}
	close(stopKilling)
	<-killerDone
	loadPhase := time.Since(began)
	t.Logf("load phase over after %v: %d kills; draining", loadPhase.Round(time.Second), kills.Load())

	// The drain: no more kills; every job must reach a final state.
	drainStart := time.Now()
	drainLimit := 90 * time.Second
	var pending []string
	for {
		jobs, _, err := s.Scan()
		if err != nil {
			t.Fatal(err)
		}
		pending = pending[:0]
		for _, j := range plan {
			if j.id == "" {
				continue
			}
			if st, _ := jobs[j.id].State(); !st.Final() {
				pending = append(pending, j.id+" "+string(st))
			}
		}
		if len(pending) == 0 || time.Since(drainStart) > drainLimit {
			break
		}
		time.Sleep(200 * time.Millisecond) // the poll of the drain
	}
	drain := time.Since(drainStart)
	if len(pending) > 0 {
		t.Errorf("%d jobs not ended %v after the load phase: %v", len(pending), drainLimit, pending[:min(len(pending), 20)])
	}
	// The watchers end with their runs; give the last ones a moment.
	wdeadline := time.After(20 * time.Second)
	for _, w := range watchers {
		select {
		case <-w.done:
		case <-wdeadline:
		}
	}
	close(stopAnswering)
	<-answererDone
	close(stopReader)
	<-readerDone
	dmu.Lock()
	for _, d := range daemons {
		if !d.alive() {
			t.Errorf("a spoold exited on its own: %v", d.err)
		}
	}
	for _, d := range daemons {
		d.stop(t, 30*time.Second)
	}
	dmu.Unlock()

	// Every job is in exactly one final state, and nothing else is left.
	jobs, other, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	// A writer killed with -9 between creating its temporary and renaming
	// it leaves the temporary: never read as anything, and removed by
	// `spool fsck --fix` (cron) once an hour old. Count them; anything else
	// is a finding.
	temps := 0
	for _, n := range other {
		switch {
		case strings.HasPrefix(n, "."):
			temps++
		case n != spool.ProgressDir && n != spool.ChatsDir && n != spool.CorruptDir && n != spool.GateDir && n != spool.DoorbellDir:
			t.Errorf("unexpected name in the root: %s", n)
		}
	}
	if names, err := relNames(s, spool.ProgressDir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, ".") {
				temps++
			}
		}
	}
	if out, err := command(raceEnv(), "spool", "--spool", dir, "fsck").CombinedOutput(); err != nil {
		t.Errorf("spool fsck after the soak: %v:\n%s", err, out)
	}
	if names, _ := relNames(s, spool.CorruptDir); len(names) > 0 {
		t.Errorf("corrupt/ holds %v: nothing of the soak should have been moved aside", names)
	}
	byState := map[spool.State]int{}
	results := map[string]*spool.Result{}
	for _, j := range plan {
		if j.id == "" {
			continue
		}
		f := jobs[j.id]
		st, _ := f.State()
		if f.States() != 1 || !st.Final() {
			t.Errorf("job %s (%s): files %b: %d states, state %s; want exactly one final state", j.id, soakKindName[j.kind], f, f.States(), st)
			continue
		}
		byState[st]++
		r, err := s.ReadResult(j.id, st)
		if err != nil {
			t.Errorf("job %s: %v", j.id, err)
			continue
		}
		results[j.id] = r
	}

	// Every attempt's start and end: no two attempts of a job overlapped,
	// no two runs of a chat overlapped, a job with attempts 1 ran at most
	// once and no job more often than its attempts.
	spans := soakTrace(t, trace)
	overlaps, chatOverlaps, unended, maxRuns, runs := 0, 0, 0, 0, 0
	type chatRun struct {
		job        string
		start, end float64
	}
	byChat := map[string][]chatRun{}
	for _, j := range plan {
		if j.id == "" {
			continue
		}
		rs := soakRuns(spans[j.id])
		runs += len(rs)
		maxRuns = max(maxRuns, len(rs))
		if len(rs) > j.attempts {
			t.Errorf("job %s (%s, attempts %d) ran %d times", j.id, soakKindName[j.kind], j.attempts, len(rs))
		}
		for k, sp := range rs {
			end := sp.end
			if end == 0 {
				unended++
				end = 1e18 // never seen to end: it overlaps whatever came after
			}
			if k+1 < len(rs) && rs[k+1].start < end {
				overlaps++
				t.Errorf("job %s: attempt %d started at %.3f while attempt %d (started %.3f) ran until %.3f",
					j.id, rs[k+1].attempt, rs[k+1].start, sp.attempt, sp.start, sp.end)
			}
			byChat[j.chat] = append(byChat[j.chat], chatRun{j.id, sp.start, end})
		}
		r := results[j.id]
		if r == nil {
			continue
		}
		switch j.kind {
		case soakCancel:
			if r.State == spool.Done {
				t.Errorf("job %s was cancelled but ended done", j.id)
			}
		case soakTimeout:
			if r.State == spool.Done {
				t.Errorf("job %s has a 1s timeout on sleep 5 but ended done", j.id)
			}
		}
	}
	for chat, rs := range byChat {
		sort.Slice(rs, func(a, b int) bool { return rs[a].start < rs[b].start })
		for k := 0; k+1 < len(rs); k++ {
			if rs[k+1].start < rs[k].end {
				chatOverlaps++
				t.Errorf("chat %s: job %s started at %.3f while job %s ran (until %.3f)%s", chat, rs[k+1].job, rs[k+1].start, rs[k].job, rs[k].end,
					soakStory(s, results[rs[k].job]))
			}
		}
	}

	// Every watcher ended with its own run's end: done:true last, the
	// final state in its words, exit 0 for done and 1 otherwise.
	watchersOK := 0
	for _, w := range watchers {
		select {
		case <-w.done:
		default:
			w.cmd.Process.Kill()
			<-w.done
			t.Errorf("watcher of job %s did not end with its run", w.job.id)
			continue
		}
		r := results[w.job.id]
		lines := strings.Split(strings.TrimSpace(w.out.String()), "\n")
		var last struct {
			Type string `json:"type"`
			Data struct {
				Description string `json:"description"`
				Done        bool   `json:"done"`
			} `json:"data"`
		}
		err := json.Unmarshal([]byte(lines[len(lines)-1]), &last)
		want := 1
		if r != nil && r.State == spool.Done {
			want = 0
		}
		switch {
		case r == nil:
		case err != nil || !last.Data.Done:
			t.Errorf("watcher of job %s: last line %q, want done:true", w.job.id, lines[len(lines)-1])
		case !strings.HasPrefix(last.Data.Description, string(r.State)):
			t.Errorf("watcher of job %s: ended with %q, but the job ended %s", w.job.id, last.Data.Description, r.State)
		case w.code != want:
			t.Errorf("watcher of job %s: exit %d, want %d for %s", w.job.id, w.code, want, r.State)
		default:
			watchersOK++
		}
	}

	// What the events say happened: recoveries and answered questions.
	recoveries, answeredJobs, leaseLost := 0, 0, 0
	for _, j := range plan {
		if j.id == "" {
			continue
		}
		evs, err := s.NewEventReader(j.id).Read()
		if err != nil {
			t.Errorf("events of %s: %v", j.id, err)
		}
		got := false
		for _, ev := range evs {
			switch {
			case ev.Type == spool.EventWorker && strings.Contains(ev.Text, " died"):
				recoveries++
			case ev.Type == spool.EventWorker && strings.Contains(ev.Text, "lease lost"):
				leaseLost++
			case ev.Type == spool.EventAnswer:
				got = true
			}
		}
		if got {
			answeredJobs++
		}
	}

	fails := reader.failures()
	for i, f := range fails {
		if i == 20 {
			t.Errorf("... and %d more reader failures", len(fails)-20)
			break
		}
		t.Errorf("reader: %s", f)
	}
	submitted := 0
	for _, j := range plan {
		if j.id != "" {
			submitted++
		}
	}
	kindCount := map[soakKind]int{}
	for _, j := range plan {
		kindCount[j.kind]++
	}
	a3 := 0
	for _, j := range plan {
		if j.attempts == 3 {
			a3++
		}
	}
	var tb strings.Builder
	row := func(k string, v any) { fmt.Fprintf(&tb, "| %-40s | %12v |\n", k, v) }
	fmt.Fprintf(&tb, "\nsoak: SOAK=%v (load phase %v, drain %v), 3 spoold --workers 4 --lease 2s\n",
		load, loadPhase.Round(time.Second), drain.Round(100*time.Millisecond))
	fmt.Fprintf(&tb, "| %-40s | %12s |\n|%s|%s|\n", "figure", "value", strings.Repeat("-", 42), strings.Repeat("-", 14))
	row("jobs submitted", submitted)
	row("  quick / say / sleep", fmt.Sprintf("%d/%d/%d", kindCount[soakQuick], kindCount[soakSay], kindCount[soakSleep]))
	row("  timeout / cancel / question", fmt.Sprintf("%d/%d/%d", kindCount[soakTimeout], kindCount[soakCancel], kindCount[soakQuestion]))
	row("  with attempts 3", a3)
	row("done / failed / cancelled", fmt.Sprintf("%d/%d/%d", byState[spool.Done], byState[spool.Failed], byState[spool.Cancelled]))
	row("jobs not in exactly one final state", submitted-byState[spool.Done]-byState[spool.Failed]-byState[spool.Cancelled])
	row("kill -9 of a spoold", kills.Load())
	row("recoveries (worker ... died)", recoveries)
	row("lease lost (a live run taken over)", leaseLost)
	row("runs (attempts started)", runs)
	row("max runs per job", maxRuns)
	row("overlapping runs of a job", overlaps)
	row("overlapping runs of a chat", chatOverlaps)
	row("runs without a recorded end", unended)
	row("questions answered (spool answer)", answers.Load())
	row("jobs that got an answer event", answeredJobs)
	row("reader passes", reader.passes.Load())
	row("reader documents parsed", reader.docs.Load())
	row("reader event lines parsed", reader.events.Load())
	row("reader empty leases (claim in flight)", reader.claims.Load())
	row("reader names gone before read", reader.gone.Load())
	row("reader failures (partial/unparsable)", len(fails))
	row("temporaries left by killed writers", temps)
	row("watchers ok", fmt.Sprintf("%d of %d", watchersOK, len(watchers)))
	t.Log(tb.String())
	if overlaps > 0 || chatOverlaps > 0 {
		t.Errorf("%d overlapping runs of a job, %d of a chat", overlaps, chatOverlaps)
	}
}

func relStr(p *string) string {
	if p == nil {
		return "(none)"
	}
	return *p
}
