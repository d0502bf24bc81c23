package spoold

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestQueueOrder(t *testing.T) {
	q := newQueue(time.Now)
	t0 := time.Now().Add(-time.Minute)
	for _, it := range []*item{
		{job: "c", at: t0.Add(2 * time.Second)},
		{job: "b", at: t0},
		{job: "a", at: t0},
		{job: "d", at: t0.Add(time.Second)},
	} {
		q.add(it)
	}
	if q.add(&item{job: "a", at: t0}) {
		t.Error("a known job was queued twice")
	}
	ctx := context.Background()
	for _, want := range []string{"a", "b", "d", "c"} {
		if got := q.next(ctx); got == nil || got.job != want {
			t.Fatalf("next = %v, want %s (FIFO by marker time, then name)", got, want)
		}
	}
}

// A marker whose time is in the future (a backoff) waits on a timer; a job
// queued meanwhile with an earlier time goes first.
func TestQueueNotBefore(t *testing.T) {
	q := newQueue(time.Now)
	q.add(&item{job: "later", at: time.Now().Add(150 * time.Millisecond)})
	go func() {
		// The point: "now" comes 20 ms into the 150 ms wait for "later",
		// and must cut it short (a wait that is not yet under way only
		// makes it first sooner).
		time.Sleep(20 * time.Millisecond)
		q.add(&item{job: "now", at: time.Now()})
	}()
	ctx := context.Background()
	began := time.Now()
	if it := q.next(ctx); it.job != "now" {
		t.Fatalf("first = %s", it.job)
	}
	if it := q.next(ctx); it.job != "later" || time.Since(began) < 140*time.Millisecond {
		t.Fatalf("second = %s after %v", it.job, time.Since(began))
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if it := q.next(ctx); it != nil {
		t.Fatalf("empty queue gave %v", it)
	}
}

// The jobs of a busy chat wait in order, and only the head is retried.
func TestQueueChatWait(t *testing.T) {
	q := newQueue(time.Now)
	t0 := time.Now().Add(-time.Minute)
	for _, j := range []string{"j2", "j1", "j3"} {
		q.known[j] = struct{}{}
	}
	q.park(&item{job: "j2", chat: "c", at: t0.Add(2)})
	q.park(&item{job: "j1", chat: "c", at: t0.Add(1)})
	q.park(&item{job: "j3", chat: "c", at: t0.Add(3)})
	if !q.waiting("c") || q.waiting("other") {
		t.Fatal("waiting")
	}
	q.retryAll()
	q.retryAll() // the head is out: no second retry
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	it := q.next(ctx)
	if it == nil || it.job != "j1" || !it.parked {
		t.Fatalf("retried %+v, want the head j1", it)
	}
	if next := q.next(ctx); next != nil {
		t.Fatalf("a second job of the chat was retried: %+v", next)
	}
	// Still busy: back to the head.
	q.park(it)
	q.retry("c")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if it := q.next(ctx2); it == nil || it.job != "j1" {
		t.Fatalf("after re-parking, retried %+v", it)
	}
	q.headDone("c")
	q.retry("c")
	if it := q.next(ctx2); it == nil || it.job != "j2" {
		t.Fatalf("after j1, retried %+v", it)
	}
}

// Two workers take two jobs of one chat in order; the second reads its
// spec first. It must not go for the chat before the first: it waits for
// the first to settle, and then joins the wait list behind it.
func TestQueueSettleInOrder(t *testing.T) {
	q := newQueue(time.Now)
	t0 := time.Now().Add(-time.Minute)
	q.add(&item{job: "j1", at: t0})
	q.add(&item{job: "j2", at: t0.Add(time.Millisecond)})
	q.add(&item{job: "other", at: t0.Add(2 * time.Millisecond)})
	ctx := context.Background()
	first, second, other := q.next(ctx), q.next(ctx), q.next(ctx)
	got := make(chan bool)
	go func() { got <- q.settle(second, "c") }()
	select {
	case <-got:
		t.Fatal("the second job settled before the first")
	case <-time.After(50 * time.Millisecond): // a window in which it must not settle
	}
	if !q.settle(first, "c") {
		t.Fatal("the first job of a free chat does not go for it")
	}
	if <-got {
		t.Fatal("the second job goes for the chat its first job is out for")
	}
	second.chat = "c"
	q.park(second)
	// A job of another chat taken after both goes at once.
	if !q.settle(other, "d") {
		t.Fatal("a job of another chat waits")
	}
	// The first was claimed: the second is retried next.
	q.headDone("c")
	q.retry("c")
	ctx2, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if it := q.next(ctx2); it == nil || it.job != "j2" || !q.settle(it, "c") {
		t.Fatalf("after the first, retried %+v", it)
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, MaxBackoff}, {1000, MaxBackoff}} {
		if got := Backoff(tc.attempt); got != tc.want {
			t.Errorf("Backoff(%d) = %v, want %v", tc.attempt, got, tc.want)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "plain"), []byte("x"), 0o644)
	for _, tc := range []struct {
		name, path, want string
		err              bool
	}{
		{"tool", "/nonexistent:" + filepath.Join(dir, "bin"), filepath.Join(dir, "bin", "tool"), false},
		{"tool", "bin", filepath.Join(dir, "bin", "tool"), false}, // relative to the job's cwd
		{"./bin/tool", "", filepath.Join(dir, "bin", "tool"), false},
		{"plain", filepath.Join(dir, "bin"), "", true}, // not executable
		{"tool", "/usr/bin", "", true},                 // the job's PATH, not spoold's
		{"sh", "", "/bin/sh", false},
	} {
		got, err := lookPath(tc.name, tc.path, dir)
		if (err != nil) != tc.err || (!tc.err && got != tc.want && !(tc.name == "sh" && err == nil)) {
			t.Errorf("lookPath(%q, %q) = %q, %v; want %q (error %v)", tc.name, tc.path, got, err, tc.want, tc.err)
		}
	}
}

// The metrics' look at the queue: every job known, the earliest time of
// those that wait for a worker; a job parked behind its chat's run is
// counted, not timed.
func TestQueueOldest(t *testing.T) {
	q := newQueue(time.Now)
	if n, at := q.oldest(); n != 0 || !at.IsZero() {
		t.Fatalf("empty queue: %d, %v", n, at)
	}
	t0 := time.Now().Add(-time.Hour)
	q.add(&item{job: "new", at: t0.Add(time.Minute)})
	old := &item{job: "old", at: t0, chat: "c"}
	q.known[old.job] = struct{}{}
	q.park(old) // behind its chat's run: not in the heap
	if n, at := q.oldest(); n != 2 || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("oldest = %d, %v; want 2, %v", n, at, t0.Add(time.Minute))
	}
}
