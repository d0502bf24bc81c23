package spoold

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// A look at the doorbell queues the jobs rung for and not known yet,
// remembers the leases of those running, takes the bells of jobs that
// ended, and hands a queued job's cancel on; a job nobody rang for waits
// for the root's listing.
func TestDoorbellQueues(t *testing.T) {
	d, s := pollDaemon(t, 3)
	sub := func() string {
		job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	queued := sub()
	os.WriteFile(s.Path("hand.json"), []byte(`{"chat":"h","argv":["true"]}`), 0o640)
	os.WriteFile(s.Path("hand.ready"), nil, 0o640)
	os.WriteFile(s.Path("r1.json"), []byte(`{"chat":"r","argv":["true"]}`), 0o640)
	os.WriteFile(s.Path("r1.running"), []byte(`{"job":"r1","worker":"w","host":"elsewhere","pid":1}`), 0o640)
	s.Ring("r1")
	s.Ring("j0000001") // ended (pollDaemon's)
	d.doorbell()
	if !d.q.has(queued) {
		t.Error("a job rung for was not queued")
	}
	if d.q.has("hand") {
		t.Error("a hand submission was queued from the doorbell: nobody rang for it")
	}
	if _, ok := d.running["r1"]; !ok {
		t.Error("a running job rung for is not a lease to judge")
	}
	if _, err := os.Lstat(s.Path("doorbell/j0000001")); err == nil {
		t.Error("the bell of an ended job was kept")
	}
	if _, err := os.Lstat(s.Path("doorbell/" + queued)); err != nil {
		t.Error("the bell of a queued job was taken")
	}
	cancelled := sub()
	if err := s.RequestCancel(cancelled, "test"); err != nil {
		t.Fatal(err)
	}
	d.doorbell()
	d.bg.Wait()
	if st, err := s.State(cancelled); st != spool.Cancelled {
		t.Errorf("a queued job whose cancel rang is %s (%v); want cancelled", st, err)
	}
	if _, err := os.Lstat(s.Path("doorbell/" + cancelled)); err == nil {
		t.Error("the bell of a job ended cancelled was kept")
	}
}

// With --poll, a job rung for is claimed though the root is never listed;
// one nobody rang for (a hand submission) waits for the listing.
func TestDoorbellClaimsWithoutListing(t *testing.T) {
	d, s := pollDaemon(t, 0)
	d.cfg.Poll = 20 * time.Millisecond
	d.cfg.Cgroup = CgroupOff
	d.cfg.Env = []string{"PATH=" + os.Getenv("PATH")}
	ready := make(chan struct{})
	d.cfg.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-ready
	d.ls.mu.Lock()
	d.ls.next = time.Now().Add(time.Hour) // no listing from now on
	listed := d.ls.count
	d.ls.mu.Unlock()
	waitState := func(job string, within time.Duration) spool.State {
		deadline := time.Now().Add(within)
		for {
			st, _ := s.State(job)
			if st.Final() || time.Now().After(deadline) {
				return st
			}
			time.Sleep(5 * time.Millisecond) // polling the tree, as an operator would
		}
	}
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitState(job, 10*time.Second); st != spool.Done {
		t.Fatalf("the job rung for is %s; want done", st)
	}
	d.ls.mu.Lock()
	n := d.ls.count
	d.ls.mu.Unlock()
	if n != listed {
		t.Fatalf("the root was listed %d times; the doorbell alone was to find the job", n-listed)
	}
	os.WriteFile(s.Path("hand.json"), []byte(`{"chat":"h","argv":["true"]}`), 0o640)
	os.WriteFile(s.Path("hand.ready"), nil, 0o640)
	if st := waitState("hand", 300*time.Millisecond); st != spool.Queued {
		t.Fatalf("a hand submission is %s with no listing; want queued", st)
	}
	d.ls.mu.Lock()
	d.ls.next = time.Time{}
	d.ls.mu.Unlock()
	d.lookRoot(false)
	if st := waitState("hand", 10*time.Second); st != spool.Done {
		t.Fatalf("the hand submission is %s after a listing; want done", st)
	}
}
