package main

import (
	"flag"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var cancelCmd = cli.Command{
	Name:  "cancel",
	Usage: "JOB [--wait] [--timeout D]",
	Short: "Request a cancel of a job, and with --wait wait for its end.",
	Long: `Writes <job>.cancel, which the daemon running the job (or the next to
claim it) acts on. A job that has already ended is left as it is (exit
0, says so). With --wait, waits until the job has a final state and
prints it; exit 124 if --timeout passes first. Exit 1: no such job.`,
	Flags: func(fs *flag.FlagSet) {
		fs.Bool("wait", false, "wait until the job has ended, and print its state")
		cli.Duration(fs, "timeout", 0, "with --wait, give up after `D` (0: never)")
	},
	Run: cancel,
}

func cancel(c *cli.Call) error {
	s, job, err := withJob(c)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.State(job)
	if err != nil {
		return err
	}
	if st.Final() {
		fmt.Fprintf(c.Stdout, "%s already %s\n", job, st)
		return nil
	}
	who := "spool cancel"
	if u, err := user.Current(); err == nil {
		who += " by " + u.Username
	}
	host, _ := os.Hostname()
	if err := s.RequestCancel(job, fmt.Sprintf("%s on %s at %s", who, host, time.Now().UTC().Format(time.RFC3339))); err != nil {
		return err
	}
	if !c.Bool("wait") {
		fmt.Fprintf(c.Stdout, "%s cancel requested\n", job)
		return nil
	}
	st, err = waitEnded(s, job, c.Duration("timeout"))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "%s %s\n", job, st)
	return nil
}

// endedPoll is the safety net beside the watch of spool cancel --wait, for
// filesystems whose changes inotify does not see, and the poll where
// inotify cannot be had.
const endedPoll = 2 * time.Second

// waitEnded waits until job has a final state: a watch on the root, added
// before the first look, so that no rename falls in between.
func waitEnded(s *spool.Spool, job string, timeout time.Duration) (spool.State, error) {
	w, err := s.Watch(spool.WatchConfig{Rescan: endedPoll, Fallback: endedPoll}, "")
	if err != nil {
		return "", err
	}
	defer w.Close()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	for {
		st, err := s.State(job)
		if err != nil {
			// A job gone altogether (collected, removed by hand) will
			// never end: say so rather than wait.
			return "", err
		}
		if st.Final() {
			return st, nil
		}
		for look := false; !look; {
			select {
			case c := <-w.C:
				j, _, ok := spool.SplitName(c.Name)
				look = c.Op == spool.Look || ok && j == job
			case <-deadline:
				return "", cli.Failf(cli.ExitTimeout, "job %s: not ended after %s", job, timeout)
			}
		}
	}
}
