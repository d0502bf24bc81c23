package spool

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func rung(s *Spool, job string) bool {
	_, err := os.Lstat(s.Path(DoorbellDir + "/" + job))
	return err == nil
}

func inode(t *testing.T, s *Spool, name string) uint64 {
	t.Helper()
	fi, err := os.Lstat(s.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// Whoever queues a job, gives it back, or asks to cancel it rings after;
// a job's end (spool.End, resumed or not) takes its bell.
func TestWritersRing(t *testing.T) {
	s := testSpool(t)
	spec := func() *Spec { return &Spec{Chat: "c", Argv: []string{"true"}} }
	claim := func(job string) *Lease {
		t.Helper()
		l, _, err := s.Claim(job, Lease{Worker: "w", Host: "h", PID: os.Getpid(), Chat: "c"})
		if err != nil || l == nil {
			t.Fatalf("claim %s: %v", job, err)
		}
		return l
	}
	take := func(job string) {
		t.Helper()
		os.Remove(s.Path(DoorbellDir + "/" + job))
	}
	job, err := s.Submit(spec())
	if err != nil || !rung(s, job) {
		t.Fatalf("Submit: %v; rung %v", err, rung(s, job))
	}
	ids, err := s.SubmitBatch([]*Spec{spec(), spec()})
	if err != nil || !rung(s, ids[0]) || !rung(s, ids[1]) {
		t.Fatalf("SubmitBatch: %v; rung %v %v", err, rung(s, ids[0]), rung(s, ids[1]))
	}
	take(job)
	if err := s.RequestCancel(job, "test"); err != nil || !rung(s, job) {
		t.Fatalf("RequestCancel: %v; rung %v", err, rung(s, job))
	}
	l := claim(job)
	take(job)
	if ok, err := s.Unclaim(l); !ok || err != nil || !rung(s, job) {
		t.Fatalf("Unclaim: %v %v; rung %v", ok, err, rung(s, job))
	}
	l = claim(job)
	take(job)
	if ok, err := s.Requeue(l, time.Now()); !ok || err != nil || !rung(s, job) {
		t.Fatalf("Requeue: %v %v; rung %v", ok, err, rung(s, job))
	}
	l = claim(job)
	if err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Failed}, Lease: l, Worker: "w"}); err != nil || rung(s, job) {
		t.Fatalf("End: %v; rung %v", err, rung(s, job))
	}
	if _, err := s.RequeueEnded(job); err != nil || !rung(s, job) {
		t.Fatalf("RequeueEnded: %v; rung %v", err, rung(s, job))
	}
	// An end resumed after a crash left only the lease to remove takes
	// the bell too.
	l = claim(job)
	if err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Done}, Lease: l, Worker: "w", crashAfter: 4}); err == nil {
		t.Fatal("End did not stop half-way")
	}
	if !rung(s, job) {
		t.Fatal("an end stopped before its last step took the bell")
	}
	if err := s.End(Ending{Result: &Result{Job: job, Chat: "c", State: Failed}, Lease: l, Worker: "w"}); err != nil || rung(s, job) {
		t.Fatalf("End resumed: %v; rung %v", err, rung(s, job))
	}
}

// A bell rung again is a new file, so that doorbell/'s names change (and
// with them its stamp), whoever polls it.
func TestRingAgainIsANewBell(t *testing.T) {
	s := testSpool(t)
	if err := s.Ring("j"); err != nil {
		t.Fatal(err)
	}
	before := inode(t, s, DoorbellDir+"/j")
	if err := s.Ring("j"); err != nil {
		t.Fatal(err)
	}
	if inode(t, s, DoorbellDir+"/j") == before {
		t.Fatal("a bell rung again is the same file: doorbell/ did not change")
	}
	if err := s.Ring("../j"); err == nil {
		t.Fatal("a bell for an invalid id")
	}
}

// Taking a bell leaves it to a job queued meanwhile, and takes it from
// one that is not queued.
func TestUnring(t *testing.T) {
	s := testSpool(t)
	job, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unring(job); err != nil || !rung(s, job) {
		t.Fatalf("Unring of a queued job: %v; rung %v; want the bell kept", err, rung(s, job))
	}
	os.Remove(s.Path(job + ExtReady))
	if err := s.Unring(job); err != nil || rung(s, job) {
		t.Fatalf("Unring of a job not queued: %v; rung %v", err, rung(s, job))
	}
	if err := s.Unring(job); err != nil {
		t.Fatalf("Unring with no bell: %v", err)
	}
	names, _ := s.Names(DoorbellDir, 0)
	if len(names) != 0 {
		t.Fatalf("doorbell/ holds %v", names)
	}
}

// The doorbell is a hint: a spool without it (an older daemon's), or with
// a symlink in its place, takes submissions as before, and nothing is
// written through the link.
func TestRingWithoutDoorbell(t *testing.T) {
	s := testSpool(t)
	os.Remove(s.Path(DoorbellDir))
	if _, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}}); err != nil {
		t.Fatalf("Submit without doorbell/: %v", err)
	}
	if _, err := os.Lstat(s.Path(DoorbellDir)); err == nil {
		t.Fatal("Submit made doorbell/")
	}
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, s.Path(DoorbellDir))
	if _, err := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}}); err != nil {
		t.Fatalf("Submit with a symlink at doorbell/: %v", err)
	}
	if names, _ := os.ReadDir(elsewhere); len(names) != 0 {
		t.Fatalf("a bell was written through the symlink: %v", names)
	}
	if b, err := s.Bells(); err == nil {
		t.Fatalf("Bells read through the symlink: %v", b)
	}
}

// gc takes the bells of jobs neither queued nor running, and the
// temporaries a crash left, and keeps the others.
func TestGCDoorbell(t *testing.T) {
	s := testSpool(t)
	queued, _ := s.Submit(&Spec{Chat: "c", Argv: []string{"true"}})
	writeRaw(t, s, "old.json", `{"chat":"c","argv":["true"]}`)
	writeRaw(t, s, "old.done", `{"job":"old","state":"done"}`)
	s.Ring("old")
	s.Ring("gone")
	writeRaw(t, s, DoorbellDir+"/.gone123", "")
	var removed []string
	if err := s.GC(GCOptions{Older: time.Hour, Now: time.Now().Add(2 * time.Hour)}, func(n string) { removed = append(removed, n) }); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"old", "gone", ".gone123"} {
		if _, err := os.Lstat(s.Path(DoorbellDir + "/" + job)); err == nil {
			t.Errorf("gc kept doorbell/%s", job)
		}
	}
	if !rung(s, queued) {
		t.Error("gc took a queued job's bell")
	}
	if len(removed) < 3 {
		t.Errorf("gc reported %v", removed)
	}
}
