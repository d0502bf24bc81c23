package spool_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmspool/vmspool/spool"
)

// A job's life in the tree: submitted, claimed by one worker, ended.
func Example() {
	dir, _ := os.MkdirTemp("", "spool-example-")
	defer os.RemoveAll(dir)
	s, err := spool.Create(filepath.Join(dir, "spool"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	job, _ := s.Submit(&spool.Spec{ID: "backup-1", Chat: "nightly", Argv: []string{"make", "backup"}})
	st, _ := s.State(job)
	fmt.Println(job, st)

	lease, _, _ := s.Claim(job, spool.Lease{Worker: "w1", Host: "h", PID: os.Getpid(), Chat: "nightly"})
	again, _, _ := s.Claim(job, spool.Lease{Worker: "w2", Host: "h", PID: os.Getpid()})
	fmt.Println("attempt", lease.Attempt, "second claimer won:", again != nil)

	s.AppendEvent(job, spool.Event{Text: "dumping the database"})
	zero := 0
	s.End(spool.Ending{Result: &spool.Result{Job: job, Chat: "nightly", State: spool.Done, Exit: &zero, Attempt: lease.Attempt}, Lease: lease})
	st, _ = s.State(job)
	fmt.Println(job, st)
	// Output:
	// backup-1 queued
	// attempt 1 second claimer won: false
	// backup-1 done
}
