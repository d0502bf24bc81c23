package main

import (
	"fmt"

	"github.com/vmspool/vmspool/internal/cli"
)

var requeueCmd = cli.Command{
	Name:  "requeue",
	Usage: "JOB",
	Short: "Queue a failed or cancelled job again.",
	Long: `Renames the job's result to its marker; the next claim starts a new
budget of attempts. Exit 1 if the job is not failed or cancelled (or
does not exist).`,
	Run: requeue,
}

func requeue(c *cli.Call) error {
	s, job, err := withJob(c)
	if err != nil {
		return err
	}
	defer s.Close()
	// A job queued again must be able to run: without a readable spec its
	// marker would be a marker without a spec.
	if _, err := s.State(job); err != nil {
		return err
	}
	if _, err := s.ReadSpec(job); err != nil {
		return cli.Failf(cli.Code(err), "%v; not queued again", err)
	}
	st, err := s.RequeueEnded(job)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "%s queued again (was %s)\n", job, st)
	return nil
}
