package spool

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestFinishAsTakenOver: a result that lands after the job was taken over
// (requeued and claimed by another worker) is taken back, and the new
// owner's lease stays.
func TestFinishAsTakenOver(t *testing.T) {
	s := testSpool(t)
	job, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := s.Claim(job, Lease{Worker: "a", Host: "h", PID: os.Getpid(), Chat: "c"})
	if err != nil || old == nil {
		t.Fatal(err)
	}
	if ok, err := s.Requeue(old, time.Now()); !ok || err != nil {
		t.Fatalf("requeue: %v %v", ok, err)
	}
	now, _, err := s.Claim(job, Lease{Worker: "b", Host: "h2", PID: 1, Chat: "c"})
	if err != nil || now == nil {
		t.Fatal(err)
	}
	err = s.FinishAs(&Result{Job: job, Chat: "c", State: Done, Worker: "a", Attempt: old.Attempt}, old)
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("FinishAs by the old owner: %v, want ErrLeaseLost", err)
	}
	if st, _ := s.State(job); st != Running {
		t.Errorf("the job is %s; want running, the new owner's", st)
	}
	if cur, _, err := s.ReadLease(job); err != nil || !cur.Same(now) {
		t.Errorf("the new owner's lease: %+v %v", cur, err)
	}
	// The owner's own end removes its lease.
	if err := s.FinishAs(&Result{Job: job, Chat: "c", State: Done, Worker: "b", Attempt: now.Attempt}, now); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.JobFiles(job); f.States() != 1 {
		t.Errorf("files after the end: %v", f)
	}
}

// TestUnclaim: a job given back is queued as it was, its attempt unspent.
func TestUnclaim(t *testing.T) {
	s := testSpool(t)
	job, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	lock, _, err := s.LockChat("c") // makes the chat's directory
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if err := s.MarkClaim("c", job); err != nil {
		t.Fatal(err)
	}
	if ls, _, _ := s.ChatRunning("c", ""); len(ls) != 0 {
		t.Errorf("ChatRunning before the claim: %+v", ls)
	}
	l, _, err := s.Claim(job, Lease{Worker: "a", Host: "h", PID: os.Getpid(), Chat: "c"})
	if err != nil || l == nil {
		t.Fatal(err)
	}
	if ls, _, _ := s.ChatRunning("c", ""); len(ls) != 1 || ls[0].Job != job {
		t.Errorf("ChatRunning: %+v", ls)
	}
	if ok, err := s.Unclaim(l); !ok || err != nil {
		t.Fatalf("unclaim: %v %v", ok, err)
	}
	if st, _ := s.State(job); st != Queued {
		t.Fatalf("after unclaim: %s", st)
	}
	again, _, err := s.Claim(job, Lease{Worker: "b", Host: "h", PID: os.Getpid(), Chat: "c"})
	if err != nil || again == nil || again.Attempt != l.Attempt {
		t.Fatalf("claim after unclaim: %+v %v; want attempt %d again", again, err, l.Attempt)
	}
	// Once the job has ended, its mark goes at the next look.
	if err := s.FinishAs(&Result{Job: job, Chat: "c", State: Done, Worker: "b", Attempt: again.Attempt}, again); err != nil {
		t.Fatal(err)
	}
	s.ChatRunning("c", "")
	if _, err := s.Stat(ChatDir("c") + "/" + job + ClaimMark); err == nil {
		t.Error("the mark of an ended job stays")
	}
}
