package tests

// The watchd stories, with the real binaries as separate processes: a
// chat's second run followed from its submit, the two guards of
// invariant 7 one at a time, serve's streams and resumes, and the demo.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
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

// watchdSpoold starts spoold on dir and stops it (SIGTERM, then -9) when
// the test ends. Its log goes to dir/../spoold.log.
func watchdSpoold(t *testing.T, dir string, args ...string) {
	t.Helper()
	startProc(t, raceEnv(), "spoold", append([]string{"--spool", dir, "--workers", "8"}, args...)...)
	// spoold creates the tree; wait for it.
	watchdWaitFor(t, "spoold to create the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, "progress"))
		return err == nil
	})
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func watchdWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, 30*time.Second, 5*time.Millisecond, what, cond)
}

// watchdSubmit runs `spool submit` and returns the job id.
func watchdSubmit(t *testing.T, dir, chat string, argv ...string) string {
	t.Helper()
	out, err := exec.Command(bin("spool"), append([]string{"--spool", dir, "submit", "--chat", chat, "--"}, argv...)...).Output()
	if err != nil {
		t.Fatalf("spool submit: %v", watchdErr(err))
	}
	return strings.TrimSpace(string(out))
}

func watchdErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

// watchdSays is a job's argv: it says each text, sleeping pause between
// them, after a first sleep. It appends to $SPOOL_EVENTS the shell's way
// (docs/contract.md), which costs no process per line: `spool say` is in the
// other stories and the demo.
func watchdSays(first, pause time.Duration, texts ...string) []string {
	var b strings.Builder
	fmt.Fprintf(&b, "sleep %.3f", first.Seconds())
	for _, x := range texts {
		fmt.Fprintf(&b, "; echo %q >> \"$SPOOL_EVENTS\"; sleep %.3f", x, pause.Seconds())
	}
	return []string{"sh", "-c", b.String()}
}

// watchdFollower is a running `watchd follow`.
type watchdFollower struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

func watchdFollow(t *testing.T, dir string, args ...string) *watchdFollower {
	t.Helper()
	f := &watchdFollower{done: make(chan struct{})}
	f.cmd = exec.Command(bin("watchd"), append([]string{"follow", "--spool", dir}, args...)...)
	f.cmd.Stdout, f.cmd.Stderr = &f.stdout, &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		f.cmd.Wait()
		f.code = f.cmd.ProcessState.ExitCode()
		close(f.done)
	}()
	t.Cleanup(func() { f.cmd.Process.Kill(); <-f.done })
	return f
}

// wait waits for the follower to exit and returns its exit code and lines.
func (f *watchdFollower) wait(t *testing.T) (int, []string) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(60 * time.Second):
		f.cmd.Process.Kill()
		<-f.done
		t.Fatalf("watchd follow did not exit; stdout:\n%s\nstderr:\n%s", f.stdout.String(), f.stderr.String())
	}
	return f.code, strings.Split(strings.TrimRight(f.stdout.String(), "\n"), "\n")
}

func (f *watchdFollower) running() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// watchdStatuses keeps the lines that are statuses said by a job (not the
// daemon's notes, which name a worker).
func watchdStatuses(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "started: ") {
			out = append(out, l)
		}
	}
	return out
}

func watchdOpen(t *testing.T, dir string) *spool.Spool {
	t.Helper()
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func watchdWaitEnded(t *testing.T, s *spool.Spool, job string) spool.State {
	t.Helper()
	var st spool.State
	watchdWaitFor(t, "job "+job+" to end", func() bool {
		st, _ = s.State(job)
		if !st.Final() {
			return false
		}
		// The done document comes before the result; a later run's may
		// have replaced it since.
		p, err := s.ReadProgress(mustChat(t, s, job))
		return err == nil && p.Job == job && p.Done
	})
	return st
}

func mustChat(t *testing.T, s *spool.Spool, job string) string {
	sp, err := s.ReadSpec(job)
	if err != nil {
		t.Fatal(err)
	}
	return sp.Chat
}

// watchdWaitWatching waits until process pid holds an inotify instance
// (or, with --poll, has started its threads): its start is stamped by then.
func watchdWaitWatching(t *testing.T, pid int) {
	t.Helper()
	watchdWaitFor(t, "the watcher to start", func() bool {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.Contains(l, "inotify") {
				return true
			}
		}
		// --poll: no inotify; the spool's directory is open once running.
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasSuffix(l, "/spool") {
				return true
			}
		}
		return false
	})
}

// watchdStory is the story once, in chat: run 1 ends done; run 2
// is submitted in the same chat and its watcher starts at once; the
// watcher relays every status of run 2, in order, none of run 1's, and
// exits 0 only after run 2 ended.
func watchdStory(t *testing.T, s *spool.Spool, dir, chat string, withJob bool, extra ...string) {
	// The sleeps of ms() are the point: random delays (0 to 30 ms) between
	// the submit, the watcher's start and the run's first event, so that
	// the 50 stories try the orderings the guards must hold in.
	r := rand.New(rand.NewPCG(rand.Uint64(), 0))
	ms := func() time.Duration { return time.Duration(r.IntN(31)) * time.Millisecond }
	j1 := watchdSubmit(t, dir, chat, watchdSays(0, 0, "r1-a", "r1-b", "r1-c")...)
	if st := watchdWaitEnded(t, s, j1); st != spool.Done {
		t.Fatalf("run 1 %s", st)
	}
	want := []string{"r2-1", "r2-2", "r2-3", "r2-4", "r2-5"}
	args := append([]string{"--chat", chat, "--timeout", "50s"}, extra...)
	var j2 string
	var f *watchdFollower
	if withJob {
		time.Sleep(ms())
		j2 = watchdSubmit(t, dir, chat, watchdSays(ms(), time.Millisecond, want...)...)
		time.Sleep(ms())
		f = watchdFollow(t, dir, append(args, "--job", j2)...)
	} else {
		// Without the job id only the stamp guard holds, so the watcher
		// must have started before the run's last flush: it starts first
		// (past the 10 ms rounding of run 1's last stamp: a clock
		// separation the guard depends on), then the run is submitted.
		time.Sleep(20*time.Millisecond + ms())
		f = watchdFollow(t, dir, args...)
		watchdWaitWatching(t, f.cmd.Process.Pid)
		time.Sleep(ms())
		j2 = watchdSubmit(t, dir, chat, watchdSays(ms(), time.Millisecond, want...)...)
	}
	code, lines := f.wait(t)
	// The watcher ends at run 2's done document, which lands just before
	// its result: the result follows within a moment.
	st := watchdWaitEnded(t, s, j2)
	if code != 0 || st != spool.Done {
		t.Fatalf("chat %s: follow exited %d with run 2 %q; stdout:\n%s\nstderr:\n%s", chat, code, st, f.stdout.String(), f.stderr.String())
	}
	got := watchdStatuses(lines)
	wantLines := append(append([]string{}, want...), "run "+j2+" done")
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("chat %s: follow said\n%s\nwant\n%s", chat, strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
}

func watchdStories(t *testing.T, n, parallel int, extra ...string) {
	dir := newSpool(t)
	watchdSpoold(t, dir)
	s := watchdOpen(t, dir)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(fmt.Sprintf("story%02d", i), func(t *testing.T) {
				watchdStory(t, s, dir, fmt.Sprintf("chat%02d", i), i%3 != 2, extra...)
			})
		}(i)
	}
	wg.Wait()
}

// TestWatchdStory runs the story 50 times, a third of them without the job
// id, with random delays between submit, the watcher's start and the run's
// first event.
func TestWatchdStory(t *testing.T) {
	watchdStories(t, 50, 8)
}

// TestWatchdStoryPoll is the story with --poll, the shared filesystems' way.
func TestWatchdStoryPoll(t *testing.T) {
	watchdStories(t, 10, 5, "--poll", "20ms")
}

// TestWatchdStampGuardWithoutRemoval: an older submitter wrote only
// <job>.ready and left the previous run's done document in place. A
// watcher started then must not take it for the new run.
func TestWatchdStampGuardWithoutRemoval(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	s := watchdOpen(t, dir)
	j1 := watchdSubmit(t, dir, "c", watchdSays(0, 0, "old-1", "old-2")...)
	watchdWaitEnded(t, s, j1)
	time.Sleep(30 * time.Millisecond) // beyond the 10 ms rounding: the clock separation the guard judges
	f := watchdFollow(t, dir, "--chat", "c", "--timeout", "50s")
	watchdWaitWatching(t, f.cmd.Process.Pid)
	time.Sleep(300 * time.Millisecond) // a window in which it must not stop
	if !f.running() {
		t.Fatalf("the watcher took the previous run's document: exit %d, said %q", f.code, f.stdout.String())
	}
	// The hand submission of docs/contract.md, without its rm.
	spec := fmt.Sprintf(`{"chat":"c","argv":["sh","-c","spool say new-1; spool say new-2"]}`)
	if err := os.WriteFile(filepath.Join(dir, ".j2.json"), []byte(spec), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, ".j2.json"), filepath.Join(dir, "j2.json"))
	os.WriteFile(filepath.Join(dir, ".j2.ready"), nil, 0o640)
	os.Rename(filepath.Join(dir, ".j2.ready"), filepath.Join(dir, "j2.ready"))
	code, lines := f.wait(t)
	if got := strings.Join(watchdStatuses(lines), "|"); code != 0 || got != "new-1|new-2|run j2 done" {
		t.Fatalf("exit %d, said %q", code, got)
	}
}

// TestWatchdJobGuard: a stale document of another job, stamped after the
// watcher's start, is not the followed job's.
func TestWatchdJobGuard(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	s := watchdOpen(t, dir)
	const j2 = "01JOBGUARD0000000000000002"
	f := watchdFollow(t, dir, "--chat", "c", "--job", j2, "--timeout", "50s")
	watchdWaitWatching(t, f.cmd.Process.Pid)
	exit := 0
	stale := &spool.Progress{Job: "01OLDJOB000000000000000001", Chat: "c", Seq: 1, Done: true, State: spool.Done, Exit: &exit,
		Status: "old news", Events: []spool.Event{{Seq: 1, Type: spool.EventStatus, Text: "old news"}}}
	if err := s.WriteProgress(stale); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a window in which it must not stop
	if !f.running() {
		t.Fatalf("the watcher took another job's document: exit %d, said %q", f.code, f.stdout.String())
	}
	out, err := exec.Command(bin("spool"), "--spool", dir, "submit", "--chat", "c", "--id", j2, "--", "sh", "-c", "spool say mine").Output()
	if err != nil || strings.TrimSpace(string(out)) != j2 {
		t.Fatalf("submit: %q %v", out, watchdErr(err))
	}
	code, lines := f.wait(t)
	if got := strings.Join(watchdStatuses(lines), "|"); code != 0 || got != "mine|run "+j2+" done" {
		t.Fatalf("exit %d, said %q", code, got)
	}
}

// TestWatchdEndedBeforeWatcher: a run that ended before its watcher
// started is reported, not waited on, when the job id is known.
func TestWatchdEndedBeforeWatcher(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	s := watchdOpen(t, dir)
	j := watchdSubmit(t, dir, "c", "sh", "-c", "spool say working; exit 3")
	watchdWaitEnded(t, s, j)
	time.Sleep(30 * time.Millisecond) // the follower starts after the run's stamps: the guard's case
	start := time.Now()
	f := watchdFollow(t, dir, "--chat", "c", "--job", j, "--json")
	code, lines := f.wait(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (failed); said %q", code, lines)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v: it waited instead of reporting", took)
	}
	var last struct {
		Type string
		Data struct {
			Description string
			Done        bool
		}
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !last.Data.Done || !strings.HasPrefix(last.Data.Description, "failed (exit 3)") {
		t.Errorf("last line %q (%v)", lines[len(lines)-1], err)
	}
	if !strings.Contains(strings.Join(lines, "\n"), `"description":"working"`) {
		t.Errorf("the run's status is missing: %q", lines)
	}
	// And when a later run's document replaced its own, from its result.
	j2 := watchdSubmit(t, dir, "c", "sh", "-c", "spool say later")
	watchdWaitEnded(t, s, j2)
	f = watchdFollow(t, dir, "--chat", "c", "--job", j)
	code, lines = f.wait(t)
	if code != 1 || strings.Join(watchdStatuses(lines), "|") != "working|run "+j+" failed (exit 3): exit status 3" {
		t.Errorf("superseded: exit %d, said %q", code, lines)
	}
}

// TestWatchdFollowErrors: bad input is one line and exit 2; a timeout is
// 124 with a last "done": true status.
func TestWatchdFollowErrors(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	for _, args := range [][]string{
		{"follow", "--spool", dir, "--chat", "../x"},
		{"follow", "--spool", dir, "--chat", "c", "--job", ".hidden"},
		{"follow", "--spool", dir},
		{"follow", "--spool", filepath.Join(dir, "nope"), "--chat", "c"},
		{"bogus"},
	} {
		cmd := exec.Command(bin("watchd"), args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if cmd.ProcessState.ExitCode() != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 || stderr.Len() == 0 {
			t.Errorf("watchd %q: %v, stderr %q", args, err, stderr.String())
		}
	}
	os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
	cmd := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "c", "--json", "--timeout", "200ms")
	out, _ := cmd.Output()
	if cmd.ProcessState.ExitCode() != 124 || !strings.Contains(string(out), `"done":true`) {
		t.Errorf("timeout: exit %d, %q", cmd.ProcessState.ExitCode(), out)
	}
	for _, args := range [][]string{{"--version"}, {"follow", "--version"}, {"-h"}, {"serve", "-h"}} {
		if out, err := exec.Command(bin("watchd"), args...).CombinedOutput(); err != nil || len(out) == 0 {
			t.Errorf("watchd %q: %v %q", args, err, out)
		}
	}
}

// watchdServe starts `watchd serve` on a free loopback port and returns its
// base URL.
func watchdServe(t *testing.T, dir string, args ...string) (string, *proc) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := startProc(t, raceEnv(), "watchd", append([]string{"serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile}, args...)...)
	var addr []byte
	watchdWaitFor(t, "watchd serve to listen", func() bool {
		addr, _ = os.ReadFile(addrFile)
		return len(addr) > 0
	})
	serveRegister(t, dir, strings.TrimSpace(string(addr)))
	return "http://" + strings.TrimSpace(string(addr)), cmd
}

type watchdSSE struct {
	id, event string
	data      map[string]any
}

// watchdStream opens an event stream and sends its events on a channel,
// closed at the stream's end.
func watchdStream(t *testing.T, ctx context.Context, url, lastID string) (<-chan watchdSSE, int) {
	t.Helper()
	return watchdStreamWith(t, ctx, http.DefaultClient, url, lastID)
}

// watchdStreamWith is watchdStream through client.
func watchdStreamWith(t *testing.T, ctx context.Context, client *http.Client, url, lastID string) (<-chan watchdSSE, int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan watchdSSE, 1024)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		r := newSSEReader(resp.Body)
		for {
			ev, ok := r.next()
			if !ok {
				return
			}
			if ev.event != "" {
				ch <- watchdSSE{id: ev.id, event: ev.event, data: ev.decode()}
			}
		}
	}()
	return ch, resp.StatusCode
}

func watchdTexts(ch <-chan watchdSSE) []string {
	var out []string
	for ev := range ch {
		if ev.event == "note" {
			continue
		}
		out = append(out, ev.id+":"+fmt.Sprint(ev.data["text"]))
	}
	return out
}

// TestWatchdServeSubscribers: two subscribers of one chat and one of
// another see exactly their events.
func TestWatchdServeSubscribers(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	url, _ := watchdServe(t, dir)
	s := watchdOpen(t, dir)
	ctx := t.Context()
	a1, _ := watchdStream(t, ctx, url+"/chats/a/events", "")
	a2, _ := watchdStream(t, ctx, url+"/chats/a/events", "")
	b1, _ := watchdStream(t, ctx, url+"/chats/b/events", "")
	// Each stream answered 200, so each is subscribed: the runs may start.
	ja := watchdSubmit(t, dir, "a", watchdSays(0, 10*time.Millisecond, "a1", "a2", "a3", "a4")...)
	jb := watchdSubmit(t, dir, "b", watchdSays(0, 10*time.Millisecond, "b1", "b2", "b3")...)
	var got [3][]string
	var wg sync.WaitGroup
	for i, ch := range []<-chan watchdSSE{a1, a2, b1} {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = watchdTexts(ch) }()
	}
	wg.Wait()
	watchdWaitEnded(t, s, ja)
	watchdWaitEnded(t, s, jb)
	wantA := "2:a1 3:a2 4:a3 5:a4 6.end:done"
	wantB := "2:b1 3:b2 4:b3 5.end:done"
	for i, want := range []string{wantA, wantA, wantB} {
		if g := strings.Join(got[i], " "); g != want {
			t.Errorf("subscriber %d got %q, want %q", i, g, want)
		}
	}
	resp, err := http.Get(url + "/chats/a")
	if err != nil {
		t.Fatal(err)
	}
	var p spool.Progress
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if p.Job != ja || !p.Done {
		t.Errorf("GET /chats/a: %+v", p)
	}
}

// TestWatchdServeResume: a reconnect with Last-Event-ID gets nothing twice
// and misses nothing.
func TestWatchdServeResume(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	url, _ := watchdServe(t, dir)
	s := watchdOpen(t, dir)
	var says []string
	for i := 1; i <= 30; i++ {
		says = append(says, fmt.Sprintf("s%02d", i))
	}
	j := watchdSubmit(t, dir, "c", watchdSays(0, 15*time.Millisecond, says...)...)
	stream := url + "/chats/c/events?job=" + j
	var seen []string
	last := ""
	for round := 0; ; round++ {
		ctx, cancel := context.WithCancel(t.Context())
		ch, code := watchdStream(t, ctx, stream, last)
		if code == http.StatusNoContent {
			cancel()
			break
		}
		n := 0
		for ev := range ch {
			if ev.event != "note" {
				seen = append(seen, ev.id+":"+fmt.Sprint(ev.data["text"]))
			}
			last = ev.id
			if n++; n == 4 || ev.event == "end" {
				break
			}
		}
		cancel() // drop the connection mid-run
		if strings.HasSuffix(last, ".end") {
			// Once more: a client that had the end is told 204.
			_, code := watchdStream(t, t.Context(), stream, last)
			if code != http.StatusNoContent {
				t.Errorf("after the end: %d, want 204", code)
			}
			break
		}
		if round > 100 {
			t.Fatal("too many rounds")
		}
	}
	watchdWaitEnded(t, s, j)
	var want []string
	for i, x := range says {
		want = append(want, fmt.Sprintf("%d:%s", i+2, x))
	}
	want = append(want, fmt.Sprintf("%d.end:done", len(says)+2))
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("seen\n%s\nwant\n%s", strings.Join(seen, " "), strings.Join(want, " "))
	}
}

// TestWatchdServeShutdown: SIGTERM ends the streams and the process exits 0.
func TestWatchdServeShutdown(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	url, p := watchdServe(t, dir)
	ch, _ := watchdStream(t, t.Context(), url+"/chats/c/events", "")
	// The stream is open once its headers came; its first event, once
	// the server has sent the stream's opening.
	eventually(t, 10*time.Second, 5*time.Millisecond, "the subscriber to be counted", func() bool {
		_, body := opsGet(t, url+"/metrics")
		return opsMetric(body, "vmspool_watchd_subscribers") >= 1
	})
	p.stop(t, 10*time.Second)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open after SIGTERM")
	}
}

// TestWatchdDemo runs scripts/demo.sh (what `make demo` runs) with the
// test's binaries, quickly, and checks its story and that it leaves no
// process of its own behind.
func TestWatchdDemo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	demoDir := filepath.Join(t.TempDir(), "demo")
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../scripts/demo.sh")
	cmd.Env = append(os.Environ(), "BIN="+binDir, "DEMO_DIR="+demoDir, "DEMO_PACE=0.02")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	text := string(out)
	i2 := strings.Index(text, "== 2.")
	i3 := strings.Index(text, "== 3.")
	if i2 < 0 || i3 < i2 {
		t.Fatalf("the demo's steps are missing:\n%s", text)
	}
	run2 := text[i2:i3]
	for _, want := range []string{"Question: Ship the fix? [yes/no]", "answered: yes", "the person said: yes", "shipped", "(exit 0: run 2 is done"} {
		if !strings.Contains(run2, want) {
			t.Errorf("run 2's part lacks %q:\n%s", want, run2)
		}
	}
	if strings.Contains(run2, "the app is ready") {
		t.Errorf("run 2's watcher relayed run 1's status:\n%s", run2)
	}
	if strings.Index(run2, "shipped") > strings.Index(run2, " done\n") {
		t.Errorf("run 2's watcher ended before run 2 did:\n%s", run2)
	}
	for _, want := range []string{"the app is ready", "vmgate refused", "watchd follow exited 1", `"done":true`, "JOB ", "progress:", "demo done"} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// Nothing it started lives on.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(demoDir)) {
			t.Errorf("left running: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
}

// TestWatchdDemoInterrupted: Ctrl-C in the middle of the demo (SIGINT to
// its whole process group, as a terminal sends it) stops everything it
// started.
func TestWatchdDemoInterrupted(t *testing.T) {
	t.Parallel()
	demoDir := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("../scripts/demo.sh")
	cmd.Env = append(os.Environ(), "BIN="+binDir, "DEMO_DIR="+demoDir, "DEMO_PACE=0.2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out watchdLockedBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdWaitFor(t, "the demo's first run", func() bool { return strings.Contains(out.String(), "reading the request") })
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the demo exited 0 after Ctrl-C")
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the demo did not stop on Ctrl-C:\n%s", out.String())
	}
	watchdWaitFor(t, "the demo's processes to be gone", func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(demoDir)) {
				return false
			}
		}
		return true
	})
}

// watchdLockedBuf is a bytes.Buffer safe for a process's writes and the
// test's reads at once.
type watchdLockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *watchdLockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *watchdLockedBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestWatchdGapSaidOnce: a watcher that joins a run after more than the
// document's 64 events says how many it missed, in one line, then relays
// the rest in order.
func TestWatchdGapSaidOnce(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	watchdSpoold(t, dir)
	s := watchdOpen(t, dir)
	j := watchdSubmit(t, dir, "c", "sh", "-c", `i=1; while [ $i -le 100 ]; do echo "line $i" >> "$SPOOL_EVENTS"; i=$((i+1)); done`)
	watchdWaitEnded(t, s, j)
	code, lines := watchdFollow(t, dir, "--chat", "c", "--job", j).wait(t)
	if code != 0 {
		t.Fatalf("exit %d: %q", code, lines)
	}
	p, err := s.ReadProgress("c")
	if err != nil {
		t.Fatal(err)
	}
	first := p.Events[0].Seq // the oldest event the document kept
	if want := fmt.Sprintf("(%d earlier events not shown)", first-1); lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	var next int64 = first - 1 // line N is event N+1: the start event is 1
	for _, l := range lines[1 : len(lines)-1] {
		if want := fmt.Sprintf("line %d", next); l != want {
			t.Fatalf("got %q, want %q (all: %q)", l, want, lines)
		}
		next++
	}
	if next != 101 || lines[len(lines)-1] != "run "+j+" done" {
		t.Errorf("ended at line %d with %q", next-1, lines[len(lines)-1])
	}
}

// TestWatchdFollowSignalled: a follower stopped by SIGTERM exits 128+15,
// which no caller can read as the run's outcome.
func TestWatchdFollowSignalled(t *testing.T) {
	t.Parallel()
	dir := newSpool(t)
	os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
	f := watchdFollow(t, dir, "--chat", "c")
	watchdWaitWatching(t, f.cmd.Process.Pid)
	f.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := f.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d after SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
}

// `watchd follow --url` reads watchd serve instead of the tree: over its
// unix socket (no token), and over TCP with the token from --token-file,
// $WATCHD_TOKEN or the spool's watchd/token. A token on the command line
// (which ps shows every local user) and a missing token are refused with
// exit 2, before anything is followed.
func TestWatchdFollowURL(t *testing.T) {
	dir := newSpool(t)
	watchdSpoold(t, dir)
	base, _ := watchdServe(t, dir)
	addr := strings.TrimPrefix(base, "http://")
	tok := serveToken(addr)
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte(tok+"\n"), 0o600)
	wrong := filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong, []byte(strings.Repeat("0", 64)), 0o600)
	elsewhere := newSpool(t)
	sock := "unix:" + filepath.Join(dir, "watchd", "serve.sock")

	for _, c := range []struct {
		name string
		args []string
		env  []string
	}{
		{"socket", []string{"--url", sock}, nil},
		{"socket unix://", []string{"--url", "unix://" + filepath.Join(dir, "watchd", "serve.sock")}, nil},
		{"token file", []string{"--url", base, "--token-file", tokFile, "--spool", elsewhere}, nil},
		{"environment", []string{"--url", base, "--spool", elsewhere}, []string{"WATCHD_TOKEN=" + tok}},
		{"the spool's token", []string{"--url", base, "--spool", dir}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			chat := "url-" + strings.NewReplacer(" ", "-", "'", "", ":", "", "/", "").Replace(c.name)
			job := watchdSubmit(t, dir, chat, watchdSays(100*time.Millisecond, 50*time.Millisecond, "one", "two", "three")...)
			cmd := exec.Command(bin("watchd"), append([]string{"follow", "--chat", chat, "--job", job, "--timeout", "60s"}, c.args...)...)
			cmd.Env = append(raceEnv(), c.env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("watchd follow %q: %v: %s", c.args, watchdErr(err), out)
			}
			for _, want := range []string{"one\n", "two\n", "three\n", "run " + job + " done\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("watchd follow %q printed %q; want %q in it", c.args, out, want)
				}
			}
		})
	}

	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"token on the command line", "ps", []string{"--url", base + "/?token=" + tok}},
		{"no token", "401", []string{"--url", base, "--spool", elsewhere}},
		{"wrong token", "401", []string{"--url", base, "--token-file", wrong}},
		{"not a token file", "not a plain file", []string{"--url", base, "--token-file", os.DevNull}},
		{"not an address", "want http", []string{"--url", "ftp://x"}},
		{"no server", "connect", []string{"--url", "unix:" + filepath.Join(elsewhere, "none.sock")}},
	} {
		cmd := exec.Command(bin("watchd"), "follow", "--chat", "c", "--timeout", "20s")
		cmd.Args = append(cmd.Args, c.args...)
		cmd.Env = raceEnv()
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code == 0 || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
			t.Errorf("%s: exit %d: %q; want non-zero, one line, with %q", c.name, code, out, c.want)
		}
		if strings.Contains(string(out), tok) {
			t.Errorf("%s: the token is in the message: %q", c.name, out)
		}
	}
}

// The unix socket: a second watchd serve on the spool is refused while
// the first answers; one killed leaves a socket the next one replaces;
// a clean stop removes it. --no-token serves loopback TCP without the
// token, and nothing else.
func TestWatchdServeSocket(t *testing.T) {
	dir := newSpool(t)
	sock := filepath.Join(dir, "watchd", "serve.sock")
	_, p := watchdServe(t, dir)
	out, err := exec.Command(bin("watchd"), "serve", "--spool", dir, "--listen", "127.0.0.1:0").CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "another server answers") {
		t.Errorf("a second watchd serve on the spool: exit %d: %s; want 1, another server answers", code, out)
	}
	p.kill()
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("after kill -9 the socket is %v, %v; want it left", fi, err)
	}
	_, p = watchdServe(t, dir)
	r := &watchdRemote{sock}
	if code := r.get(t, "/chats"); code != 200 {
		t.Errorf("GET /chats over the replaced socket: %d", code)
	}
	p.stop(t, 15*time.Second)
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after a clean stop the socket is still there: %v", err)
	}

	// Something else in the socket's place is never removed.
	os.WriteFile(sock, []byte("mine"), 0o640)
	out, err = exec.Command(bin("watchd"), "serve", "--spool", dir, "--listen", "none").CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "not a socket") {
		t.Errorf("a file in the socket's place: exit %d: %s", code, out)
	}
	if b, _ := os.ReadFile(sock); string(b) != "mine" {
		t.Errorf("the file in the socket's place was changed: %q", b)
	}
	os.Remove(sock)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0", "--no-token"}, "loopback only"},
		{[]string{"--listen", "none", "--no-token"}, "--no-token"},
		{[]string{"--listen", "none", "--socket", "none"}, "nothing to listen on"},
		{[]string{"--socket", "relative.sock"}, "absolute"},
	} {
		out, err := exec.Command(bin("watchd"), append([]string{"serve", "--spool", dir}, c.args...)...).CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("watchd serve %q: exit %d: %s; want 2 and %q", c.args, code, out, c.want)
		}
	}
	addrFile := filepath.Join(t.TempDir(), "addr")
	startProc(t, raceEnv(), "watchd", "serve", "--spool", newSpool(t), "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--no-token", "--socket", "none")
	var addr []byte
	watchdWaitFor(t, "watchd serve --no-token to listen", func() bool {
		addr, _ = os.ReadFile(addrFile)
		return len(addr) > 0
	})
	resp, err := (&http.Client{Transport: &http.Transport{}}).Get("http://" + strings.TrimSpace(string(addr)) + "/chats")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("--no-token: GET /chats without a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// watchdRemote asks watchd serve over its unix socket.
type watchdRemote struct{ sock string }

func (r *watchdRemote) get(t *testing.T, path string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", r.sock)
	}}}
	resp, err := c.Get("http://localhost" + path)
	if err != nil {
		t.Fatalf("GET %s over %s: %v", path, r.sock, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
