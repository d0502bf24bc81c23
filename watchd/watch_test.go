package watchd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
	"golang.org/x/sys/unix"
)

func newTestSpool(t testing.TB) *spool.Spool {
	t.Helper()
	s, err := spool.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// syncBuf is an io.Writer safe to read while Follow writes it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// run is a fake daemon's run: it adds events to the chat's document and
// flushes it, the way spoold does.
type run struct {
	t *testing.T
	s *spool.Spool
	p *spool.Progress
}

func newRun(t *testing.T, s *spool.Spool, chat, job string) *run {
	return &run{t: t, s: s, p: &spool.Progress{Job: job, Chat: chat, State: spool.Running, Started: spool.Now()}}
}

func (r *run) say(texts ...string) *run {
	for _, x := range texts {
		r.p.Add(spool.Event{Seq: r.p.Seq + 1, At: spool.Now(), Type: spool.EventStatus, Text: x})
	}
	return r.flush()
}

func (r *run) flush() *run {
	if err := r.s.WriteProgress(r.p); err != nil {
		r.t.Fatal(err)
	}
	return r
}

func (r *run) end(st spool.State, exit int) *run {
	r.p.Done, r.p.State, r.p.Exit = true, st, &exit
	return r.flush()
}

func follow(t *testing.T, s *spool.Spool, cfg FollowConfig) (*syncBuf, chan error, chan *Output) {
	t.Helper()
	out := &syncBuf{}
	cfg.Spool, cfg.Out = s, out
	if cfg.Began.IsZero() {
		cfg.Began = time.Now()
	}
	errc, endc := make(chan error, 1), make(chan *Output, 1)
	go func() {
		end, err := Follow(context.Background(), cfg)
		endc <- end
		errc <- err
	}()
	return out, errc, endc
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // the poll of the wait
	}
}

// waitWatched waits until this process holds an inotify watch on dir
// (the kernel lists each watch in /proc/self/fdinfo): a tally has set
// up its watch, and what is written in dir from now on reaches it as an
// event, not in its first read.
func waitWatched(t *testing.T, dir string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	// The kernel's device number is major<<20 | minor.
	want := fmt.Sprintf(" ino:%x sdev:%x ", st.Ino, unix.Major(st.Dev)<<20|unix.Minor(st.Dev))
	waitFor(t, "a watch on "+dir, func() bool {
		fds, _ := os.ReadDir("/proc/self/fdinfo")
		for _, fd := range fds {
			if b, _ := os.ReadFile("/proc/self/fdinfo/" + fd.Name()); bytes.Contains(b, []byte(want)) {
				return true
			}
		}
		return false
	})
}

func TestFollowTheStory(t *testing.T) {
	for _, poll := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run("poll="+poll.String(), func(t *testing.T) {
			s := newTestSpool(t)
			// Run 1 ended, and its document is still there (an older
			// submitter did not remove it).
			newRun(t, s, "c", "j1").say("one", "two").end(spool.Done, 0)
			// The sleep is the point: the tally starts past run 1's
			// stamps and their 10 ms rounding, the clock separation its
			// stamp guard judges.
			time.Sleep(30 * time.Millisecond)
			out, errc, endc := follow(t, s, FollowConfig{Chat: "c", Poll: poll})
			// Each step is relayed before the next is written: the run is
			// followed as it goes, not read whole at its end.
			r2 := newRun(t, s, "c", "j2")
			for i := 1; i <= 5; i++ {
				step := "step " + string(rune('0'+i))
				r2.say(step)
				waitFor(t, step, func() bool { return strings.Contains(out.String(), step+"\n") })
			}
			r2.end(spool.Done, 0)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			end := <-endc
			if end.Job != "j2" || end.State != spool.Done {
				t.Errorf("end %+v", end)
			}
			want := "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nrun j2 done\n"
			if got := out.String(); got != want {
				t.Errorf("out\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestFollowWaitsForDocumentAndRecreate(t *testing.T) {
	s := newTestSpool(t)
	out, errc, _ := follow(t, s, FollowConfig{Chat: "c", Job: "j", JSON: true})
	// The tally waits for a document that is not there yet.
	waitWatched(t, s.Path(spool.ProgressDir))
	r := newRun(t, s, "c", "j").say("a")
	waitFor(t, "a", func() bool { return strings.Contains(out.String(), `"a"`) })
	// Deleted and recreated: the watch is on the directory, so it goes on.
	if err := s.Remove(spool.ProgressPath("c")); err != nil {
		t.Fatal(err)
	}
	r.say("b").end(spool.Failed, 2)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// What Open WebUI reads of each line ("type" and "data") is exactly
	// its status event; "vmspool" carries the same output's structure.
	want := `{"type":"status","data":{"description":"a","done":false}}
{"type":"status","data":{"description":"b","done":false}}
{"type":"status","data":{"description":"failed (exit 2)","done":true}}
`
	var owui strings.Builder
	var runs []*Message
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev StatusEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		runs = append(runs, ev.Run)
		ev.Run = nil
		b, _ := json.Marshal(ev)
		owui.Write(append(b, '\n'))
	}
	if got := owui.String(); got != want {
		t.Errorf("out\n%s\nwant\n%s", got, want)
	}
	if len(runs) != 3 || runs[0] == nil || runs[0].Kind != Status || runs[0].Job != "j" ||
		runs[2].Kind != End || runs[2].State != spool.Failed || runs[2].Exit == nil || *runs[2].Exit != 2 {
		t.Errorf("the lines' structure: %+v", runs)
	}
}

func TestFollowSkipsBadDocumentsWithOneWarning(t *testing.T) {
	s := newTestSpool(t)
	var logb syncBuf
	log := logrus.New()
	log.SetOutput(&logb)
	out, errc, _ := follow(t, s, FollowConfig{Chat: "c", Log: log})
	p := s.Path(spool.ProgressPath("c"))
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(p+".x", []byte("{not json"), 0o640); err != nil {
			t.Fatal(err)
		}
		os.Rename(p+".x", p)
		if i == 0 {
			waitFor(t, "the warning", func() bool { return strings.Contains(logb.String(), "does not parse") })
			continue
		}
		// The sleep is the point: a window in which the tally reads
		// the bad document again, and must not warn again.
		time.Sleep(10 * time.Millisecond)
	}
	os.Remove(p)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(`{"job":"evil","done":true,"state":"done","updated":9999999999}`), 0o644)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warning about the symlink", func() bool { return strings.Contains(logb.String(), "not a regular file") })
	os.Remove(p)
	newRun(t, s, "c", "j").say("fine").end(spool.Done, 0)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "fine\nrun j done\n" {
		t.Errorf("out %q", got)
	}
	logs := logb.String()
	if n := strings.Count(logs, "does not parse"); n != 1 {
		t.Errorf("%d warnings about the unparsable document, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, "not a regular file"); n != 1 {
		t.Errorf("%d warnings about the symlink, want 1:\n%s", n, logs)
	}
}

func TestFollowTimeout(t *testing.T) {
	s := newTestSpool(t)
	out, errc, _ := follow(t, s, FollowConfig{Chat: "c", JSON: true, Timeout: 50 * time.Millisecond})
	if err := <-errc; !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	if got := out.String(); !strings.Contains(got, `"done":true`) || strings.Count(got, "\n") != 1 {
		t.Errorf("out %q", got)
	}
}

func TestFollowEndFromResultWhenSuperseded(t *testing.T) {
	// The followed job ended and a later run of the chat replaced its
	// document before the watcher read it: the rest of its events come
	// from <job>.events and its end from its result.
	s := newTestSpool(t)
	for _, x := range []string{"a", "b", "c"} {
		if _, err := s.AppendEvent("j1", spool.Event{Text: x}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.End(spool.Ending{Result: &spool.Result{Job: "j1", Chat: "c", State: spool.Done, Exit: ip(0)}}); err != nil {
		t.Fatal(err)
	}
	newRun(t, s, "c", "j2").say("other run")
	out, errc, endc := follow(t, s, FollowConfig{Chat: "c", Job: "j1"})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if end := <-endc; !end.FromResult {
		t.Errorf("end not from the result: %+v", end)
	}
	if got := out.String(); got != "a\nb\nc\nrun j1 done\n" {
		t.Errorf("out %q", got)
	}
}

func TestFollowEvery(t *testing.T) {
	s := newTestSpool(t)
	out, errc, _ := follow(t, s, FollowConfig{Chat: "c", JSON: true, Every: time.Hour})
	r := newRun(t, s, "c", "j")
	r.say("first")
	waitFor(t, "first", func() bool { return strings.Contains(out.String(), "first") })
	for i := 0; i < 20; i++ {
		r.say("held")
	}
	r.p.Add(spool.Event{Seq: r.p.Seq + 1, Type: spool.EventQuestion, ID: "q", Text: "ok?", Options: []string{"y", "n"}})
	r.p.Question = &spool.Question{ID: "q", Text: "ok?", Options: []string{"y", "n"}}
	r.flush()
	waitFor(t, "the question", func() bool { return strings.Contains(out.String(), "ok?") })
	r.end(spool.Done, 0)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if n := strings.Count(got, "\n"); n != 3 || strings.Contains(got, "held") {
		t.Errorf("want first, the question and the end only:\n%s", got)
	}
}

func TestHubSharesReads(t *testing.T) {
	s := newTestSpool(t)
	h := startHub(t, s, HubConfig{})
	var subs []*Sub
	for i := 0; i < 10; i++ {
		sub, err := h.Subscribe("c")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	other, _ := h.Subscribe("d")
	if chats, n := h.Chats(); chats != 2 || n != 11 {
		t.Errorf("chats %d subs %d", chats, n)
	}
	for _, sub := range append(subs, other) {
		<-sub.C // the document as it was at subscribe: none
		sub.Latest()
	}
	newRun(t, s, "c", "j").say("x")
	var first *spool.Progress
	for _, sub := range subs {
		select {
		case <-sub.C:
		case <-time.After(5 * time.Second):
			t.Fatal("no change delivered")
		}
		snap, _ := sub.Latest()
		if snap.Doc == nil {
			t.Fatal("no document")
		}
		if first == nil {
			first = snap.Doc
		} else if snap.Doc != first {
			t.Error("the document was read once per subscriber, not once per change")
		}
	}
	select {
	case <-other.C:
		t.Error("chat d's subscriber was told of chat c's change")
	case <-time.After(20 * time.Millisecond):
	}
	for _, sub := range subs {
		sub.Close()
	}
	other.Close()
	if chats, n := h.Chats(); chats != 0 || n != 0 {
		t.Errorf("after close: chats %d subs %d", chats, n)
	}
}

func TestHubCreatesProgressDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	os.Mkdir(dir, 0o750)
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := NewHub(s, HubConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	fi, err := os.Stat(filepath.Join(dir, "progress"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("progress/: %v %v", fi, err)
	}
}

func TestHubSurvivesProgressDirReplaced(t *testing.T) {
	// An operator's rm -r progress/ (or an unmount) silently ends the old
	// watch; the safety net notices and watches the new directory.
	s := newTestSpool(t)
	h := startHub(t, s, HubConfig{Rescan: 30 * time.Millisecond})
	sub, _ := h.Subscribe("c")
	defer sub.Close()
	if err := os.RemoveAll(s.Path(spool.ProgressDir)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub to make progress/ again", func() bool {
		fi, err := os.Lstat(s.Path(spool.ProgressDir))
		return err == nil && fi.IsDir()
	})
	newRun(t, s, "c", "j").say("after")
	waitFor(t, "the document in the new progress/", func() bool {
		snap, _ := sub.Latest()
		return snap.Doc != nil && snap.Doc.Status == "after"
	})
}

func TestHubPollSeesChanges(t *testing.T) {
	s := newTestSpool(t)
	h := startHub(t, s, HubConfig{Poll: 10 * time.Millisecond})
	sub, _ := h.Subscribe("c")
	defer sub.Close()
	r := newRun(t, s, "c", "j")
	for _, x := range []string{"a", "b", "c"} {
		r.say(x)
		waitFor(t, x, func() bool {
			snap, _ := sub.Latest()
			return snap.Doc != nil && snap.Doc.Status == x
		})
	}
	s.Remove(spool.ProgressPath("c"))
	waitFor(t, "the removal", func() bool {
		snap, fresh := sub.Latest()
		return fresh && snap.Doc == nil
	})
}

// startHub runs a Hub on s until the test ends.
func startHub(t *testing.T, s *spool.Spool, cfg HubConfig) *Hub {
	t.Helper()
	h, err := NewHub(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	t.Cleanup(func() { cancel(); h.Close() })
	return h
}

// TestFollowerEndFromResultWhenCleared: the followed job ended (its last
// document, then its result) and the chat was cleared by the next
// submission before the watcher read it. The last document landed before
// the result, so it will not come back: the end is told from the result
// at once, not after a grace (the look every CheckEvery is an hour here).
func TestFollowerEndFromResultWhenCleared(t *testing.T) {
	s := newTestSpool(t)
	s.AppendEvent("j1", spool.Event{Text: "working"})
	if err := s.End(spool.Ending{Result: &spool.Result{Job: "j1", Chat: "c", State: spool.Failed, Exit: ip(3)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearChat("c"); err != nil {
		t.Fatal(err)
	}
	ctx, w := followJ1(t, s)
	w.CheckEvery = time.Hour
	var got []Output
	for len(got) == 0 || got[len(got)-1].Kind != End {
		out, err := w.Next(ctx, nil)
		if err != nil {
			t.Fatalf("after %+v: %v", got, err)
		}
		got = append(got, out...)
	}
	if end := got[len(got)-1]; !end.FromResult || end.State != spool.Failed || said(got) != "status:working | end:failed (exit 3)" {
		t.Errorf("outputs %s, end %+v", said(got), end)
	}
}

// followJ1 follows job j1 of chat c on a hub of its own, until the test
// ends (at most 10 s).
func followJ1(t *testing.T, s *spool.Spool) (context.Context, *Follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	h, err := NewHub(s, HubConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	go h.Run(ctx)
	f, err := NewFollower(s, h, "c", Guards{Began: spool.Now(), Job: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return ctx, f
}

// A run's last document lands before its result (spool.End): the End it
// carries is held until the result is there, so that whoever reads the
// job's state after the End reads it ended. Its events are told at once.
func TestFollowerEndWaitsForResult(t *testing.T) {
	s := newTestSpool(t)
	ev, err := s.AppendEvent("j1", spool.Event{Text: "working"})
	if err != nil {
		t.Fatal(err)
	}
	last := &spool.Progress{Job: "j1", Chat: "c", Seq: ev.Seq, Events: []spool.Event{ev}, Done: true, State: spool.Done, Exit: ip(0)}
	if err := s.WriteProgress(last); err != nil {
		t.Fatal(err)
	}
	ctx, f := followJ1(t, s)
	out, err := f.Next(ctx, nil)
	if err != nil || said(out) != "status:working" {
		t.Fatalf("before the result: %s, %v (want the events and no end)", said(out), err)
	}
	if err := s.End(spool.Ending{Result: &spool.Result{Job: "j1", Chat: "c", State: spool.Done, Exit: ip(0)}}); err != nil {
		t.Fatal(err)
	}
	var got []Output
	for len(got) == 0 || got[len(got)-1].Kind != End {
		out, err := f.Next(ctx, nil)
		if err != nil {
			t.Fatalf("after %s: %v", said(got), err)
		}
		if st, _ := s.State("j1"); len(out) > 0 && out[len(out)-1].Kind == End && !st.Final() {
			t.Fatalf("the End came with the job %s", st)
		}
		got = append(got, out...)
	}
	if end := got[len(got)-1]; end.State != spool.Done {
		t.Errorf("end %+v", end)
	}
}

// A result that never comes (its daemon died between the two writes, and
// the recovery is yet to come) holds the End no longer than endHold.
func TestFollowerEndHoldIsBounded(t *testing.T) {
	s := newTestSpool(t)
	if err := s.WriteProgress(&spool.Progress{Job: "j1", Chat: "c", Done: true, State: spool.Failed, Exit: ip(2)}); err != nil {
		t.Fatal(err)
	}
	ctx, f := followJ1(t, s)
	wake := make(chan time.Time)
	close(wake)
	for f.held == nil {
		if _, err := f.Next(ctx, wake); err != nil {
			t.Fatal(err)
		}
	}
	f.heldSince = time.Now().Add(-endHold)
	out, err := f.Next(ctx, nil)
	if err != nil || len(out) != 1 || out[0].Kind != End || out[0].State != spool.Failed {
		t.Fatalf("past the hold: %s, %v", said(out), err)
	}
}
