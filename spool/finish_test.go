package spool

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEndTakenOver: a result that lands after the job was taken over
// (requeued and claimed by another worker) is taken back, and the new
// owner's lease stays.
func TestEndTakenOver(t *testing.T) {
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
	err = s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Done, Worker: "a", Attempt: old.Attempt}, Lease: old, Worker: "a"})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("End by the old owner: %v, want ErrLeaseLost", err)
	}
	if st, _ := s.State(job); st != Running {
		t.Errorf("the job is %s; want running, the new owner's", st)
	}
	if cur, _, err := s.ReadLease(job); err != nil || !cur.Same(now) {
		t.Errorf("the new owner's lease: %+v %v", cur, err)
	}
	// The owner's own end removes its lease.
	if err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Done, Worker: "b", Attempt: now.Attempt}, Lease: now, Worker: "b"}); err != nil {
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
	if err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Done, Worker: "b", Attempt: again.Attempt}, Lease: again, Worker: "b"}); err != nil {
		t.Fatal(err)
	}
	s.ChatRunning("c", "")
	if _, err := s.Stat(ChatDir("c") + "/" + job + ClaimMark); err == nil {
		t.Error("the mark of an ended job stays")
	}
}

// deadPID is above the kernel's largest pid_max: no process has it.
const deadPID = 1<<22 + 1

// endShape is an ended job as an operator reads it: its files, its end
// events, its result and its chat's document. Two ends by different paths
// compare equal when they differ only in what each path says.
type endShape struct {
	States    int    // .done, .failed, .cancelled
	Lease     bool   // .running left
	Ends      int    // end events
	LastIsEnd bool   // the end event is the last one
	EndText   string // the end event's text
	State     State  // the result's
	Error     string // the result's
	Attempt   int
	Doc       string // the chat's document: job, state, done, its last event's type
}

func shapeOf(t *testing.T, s *Spool, job, chat string) endShape {
	t.Helper()
	f, err := s.JobFiles(job)
	if err != nil {
		t.Fatal(err)
	}
	sh := endShape{States: f.States(), Lease: f&HasRunning != 0}
	evs, err := s.NewEventReader(job).Tail(1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Type == EventEnd {
			sh.Ends++
			sh.LastIsEnd = i == len(evs)-1
			sh.EndText = ev.Text
		}
	}
	if st, ok := f.State(); ok && st.Final() {
		r, err := s.ReadResult(job, st)
		if err != nil {
			t.Fatal(err)
		}
		sh.State, sh.Attempt = r.State, r.Attempt
		if r.Error != nil {
			sh.Error = *r.Error
		}
	}
	if p, err := s.ReadProgress(chat); err == nil {
		last := ""
		if len(p.Events) > 0 {
			last = p.Events[len(p.Events)-1].Type
		}
		sh.Doc = fmt.Sprintf("%s %s done=%v last=%s", p.Job, p.State, p.Done, last)
	}
	return sh
}

// claimed is a job claimed by a worker whose process is gone, with a start
// event and a running document, as a run leaves it.
func claimed(t *testing.T, s *Spool, chat string) (string, *Lease) {
	t.Helper()
	job, err := s.Submit(argvSpec(chat, "true"))
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := s.Claim(job, Lease{Worker: "w", Host: "h", PID: deadPID, Chat: chat, LeaseS: 30})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	s.AppendEvent(job, Event{Type: EventStart, Text: "started", Worker: "w", Attempt: l.Attempt})
	s.AppendEvent(job, Event{Text: "working"})
	if err := s.WriteProgress(&Progress{Job: job, Chat: chat, State: Running, Started: l.Claimed}); err != nil {
		t.Fatal(err)
	}
	return job, l
}

// TestEndCrashResumes: an end stopped after any of its steps, as a kill -9
// there would stop it, is finished by whoever finds the lease (End again,
// as spoold's recovery calls it, or fsck --fix) into the very tree an end
// that was not stopped leaves: one end event, last; the result it began
// with, not "worker died"; the chat's document done.
func TestEndCrashResumes(t *testing.T) {
	zero := 0
	result := func(job, chat string, l *Lease) *Result {
		return &Result{Job: job, Chat: chat, State: Done, Exit: &zero, Attempt: l.Attempt, First: l.First, Worker: "w"}
	}
	s := testSpool(t)
	job, l := claimed(t, s, "whole")
	if err := s.End(Ending{Result: result(job, "whole", l), Lease: l, Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	want := shapeOf(t, s, job, "whole")
	if want.States != 1 || want.Lease || want.Ends != 1 || !want.LastIsEnd || want.State != Done || want.EndText != "done (exit 0)" ||
		want.Doc != job+" done done=true last=end" {
		t.Fatalf("an end not stopped: %+v", want)
	}
	for _, by := range []string{"end", "fsck"} {
		for k := 1; k <= 4; k++ {
			t.Run(fmt.Sprintf("%s/after%d", by, k), func(t *testing.T) {
				s := testSpool(t)
				chat := "c"
				job, l := claimed(t, s, chat)
				err := s.End(Ending{Result: result(job, chat, l), Lease: l, Worker: "w", crashAfter: k})
				if !errors.Is(err, errCrashed) {
					t.Fatalf("End stopped after %d steps: %v", k, err)
				}
				if st, _ := s.State(job); k < 4 && st != Running {
					t.Fatalf("after %d steps the job is %s, want running", k, st)
				}
				rec, _, err := s.ReadLease(job)
				if err != nil || rec.Ending == nil || rec.Ending.State != Done {
					t.Fatalf("the lease after %d steps: %+v %v; want the ending recorded", k, rec, err)
				}
				recoverEnd(t, s, by, job, chat, rec)
				got := shapeOf(t, s, job, chat)
				want := want
				want.Doc = strings.Replace(want.Doc, want.Doc[:strings.IndexByte(want.Doc, ' ')], job, 1)
				if got != want {
					t.Errorf("resumed after %d steps by %s:\n got %+v\nwant %+v", k, by, got, want)
				}
			})
		}
	}
}

// TestEndHoldingStops: an end whose Holding turns false between two steps
// (spoold's fence fired while the end was written) stops there, writes
// nothing more, and returns ErrLeaseLost; whoever recovers the lease then
// (End, as spoold's recovery calls it with "worker died", or fsck --fix)
// leaves the one shape: the end begun (the ending recorded in the lease)
// is finished as it was begun, and an end not begun is the recovery's.
func TestEndHoldingStops(t *testing.T) {
	zero := 0
	for _, by := range []string{"end", "fsck"} {
		for k := 0; k <= 4; k++ {
			t.Run(fmt.Sprintf("%s/holding%d", by, k), func(t *testing.T) {
				s := testSpool(t)
				chat := "c"
				job, l := claimed(t, s, chat)
				asked := 0
				holding := func() bool { asked++; return asked <= k }
				res := &Result{Job: job, Chat: chat, State: Done, Exit: &zero, Attempt: l.Attempt, First: l.First, Worker: "w"}
				err := s.End(Ending{Result: res, Lease: l, Worker: "w", Holding: holding})
				if !errors.Is(err, ErrLeaseLost) {
					t.Fatalf("End with Holding false after %d steps: %v; want ErrLeaseLost", k, err)
				}
				if asked != k+1 {
					t.Errorf("Holding asked %d times; want %d, then nothing more", asked, k+1)
				}
				// Exactly the k steps before were made (a lease counts
				// among States: a result beside it makes two).
				got := shapeOf(t, s, job, chat)
				rec, _, err := s.ReadLease(job)
				if err != nil {
					t.Fatalf("the lease after %d steps: %v", k, err)
				}
				if (rec.Ending != nil) != (k >= 1) || (got.Ends == 1) != (k >= 2) || got.Ends > 1 ||
					strings.Contains(got.Doc, "done=true") != (k >= 3) || (got.States == 2) != (k >= 4) || !got.Lease {
					t.Fatalf("after %d steps: ending recorded %v, %+v", k, rec.Ending != nil, got)
				}
				recoverEnd(t, s, by, job, chat, rec)
				got = shapeOf(t, s, job, chat)
				want := endShape{States: 1, Ends: 1, LastIsEnd: true, State: Done, EndText: "done (exit 0)", Attempt: l.Attempt, Doc: job + " done done=true last=end"}
				if k == 0 {
					// Nothing of the end was made: the recovery's own.
					want.State, want.EndText, want.Error, want.Doc = Failed, "failed: worker w died", "worker w died", job+" failed done=true last=end"
				}
				if got != want {
					t.Errorf("recovered by %s after %d steps:\n got %+v\nwant %+v", by, k, got, want)
				}
			})
		}
	}
}

// recoverEnd recovers the lease rec of a dead worker w, by End as
// spoold's recovery calls it ("worker w died": an end the lease records
// wins) or by fsck --fix.
func recoverEnd(t *testing.T, s *Spool, by, job, chat string, rec *Lease) {
	t.Helper()
	switch by {
	case "end":
		died := &Result{Job: job, Chat: chat, State: Failed, Attempt: rec.Attempt, Worker: "w"}
		died.Errorf("worker w died")
		if err := s.End(Ending{Result: died, Lease: rec, Worker: "r"}); err != nil {
			t.Fatal(err)
		}
	case "fsck":
		found, err := s.Fsck(FsckOptions{Fix: true, Host: "h", Boot: "b"})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			if !f.Fixed() {
				t.Errorf("finding not fixed: %s", f)
			}
		}
	}
}

// TestEndProgressBeforeResult: when the result lands, the chat's last
// document is already there, done, with the end event (invariant 7); a
// run's own document (Progress) and one End writes itself alike.
func TestEndProgressBeforeResult(t *testing.T) {
	for _, own := range []bool{false, true} {
		s := testSpool(t)
		job, l := claimed(t, s, "c")
		var p *Progress
		if own {
			p = &Progress{Job: job, Chat: "c", State: Running, Started: l.Claimed}
		}
		seen := false
		err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Failed, Attempt: l.Attempt}, Lease: l, Worker: "w", Progress: p,
			BeforeResult: func() {
				seen = true
				doc, err := s.ReadProgress("c")
				if err != nil || doc.Job != job || !doc.Done || doc.State != Failed {
					t.Errorf("own=%v: the document before the result: %+v %v", own, doc, err)
				}
				if st, _ := s.State(job); st != Running {
					t.Errorf("own=%v: the job is %s before its result, want running", own, st)
				}
			}})
		if err != nil || !seen {
			t.Fatalf("own=%v: %v, hook called %v", own, err, seen)
		}
		if sh := shapeOf(t, s, job, "c"); sh.Ends != 1 || !sh.LastIsEnd || sh.State != Failed || sh.Doc != job+" failed done=true last=end" {
			t.Errorf("own=%v: %+v", own, sh)
		}
	}
}

// TestEndUnqueued: a job nothing queued (fsck's spec that does not parse)
// ends with its end event and its result, and twice is not two ends.
func TestEndUnqueued(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "j.json", `{"chat":"c","argv":[]}`)
	for i := 0; i < 2; i++ {
		r := &Result{Job: "j", Chat: "c", State: Failed}
		r.Errorf("spec does not parse")
		if err := s.End(Ending{Result: r, Worker: "fsck"}); err != nil {
			t.Fatal(err)
		}
	}
	if sh := shapeOf(t, s, "j", "c"); sh.Ends != 1 || sh.State != Failed || sh.EndText != "failed: spec does not parse" || sh.Doc != "j failed done=true last=end" {
		t.Errorf("%+v", sh)
	}
}

func TestEndText(t *testing.T) {
	three := 3
	multi := "boom\nand more"
	empty := ""
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{State: Done}, "done"},
		{Result{State: Failed, Exit: &three, Error: &multi}, "failed (exit 3): boom"},
		{Result{State: Cancelled, Error: &empty}, "cancelled"},
	} {
		if got := EndText(&tc.r); got != tc.want {
			t.Errorf("EndText(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}
