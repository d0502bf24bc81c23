// Command spool is the shell's view of the job spool: it submits jobs,
// lists and shows them, cancels and requeues them, answers a run's
// question, speaks for a job from inside it (say, ask), and collects and
// checks the tree (gc, fsck). It runs no job itself; spoold does.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

// prog is the spool command: its commands, each registered once, in the
// file that does its work.
var prog = &cli.Program{
	Name:  "spool",
	Usage: "[--spool DIR] COMMAND [flags] [args]",
	Short: "The shell's view of the job spool (docs/contract.md).",
	Long: `The spool is --spool DIR, else $SPOOL_DIR, else $JOBS_DIR, else
/var/spool/vm for root; for anyone else ${XDG_STATE_HOME:-~/.local/state}/vmspool
if it exists, else /var/spool/vm if they may read it (the vmspool user and
its group), else the per-user path.
Exit codes: 0 ok, 1 failed or nothing to do (see each command), 2 usage
or bad input, 124 timed out.`,
	Common: func(fs *flag.FlagSet) {
		fs.String("spool", "", "the spool `DIR`")
	},
}

func init() {
	for _, c := range []cli.Command{submitCmd, lsCmd, showCmd, cancelCmd, requeueCmd, answerCmd, sayCmd, askCmd, gcCmd, fsckCmd} {
		prog.Register(c)
	}
}

func main() { prog.Main() }

// withJob checks that the call names one JOB and that its id is valid,
// and opens the spool; the caller closes it.
func withJob(c *cli.Call) (*spool.Spool, string, error) {
	if len(c.Args) != 1 {
		return nil, "", c.Usagef("want one JOB")
	}
	job := c.Args[0]
	if err := spool.CheckJobID(job); err != nil {
		return nil, "", err
	}
	s, err := open(c)
	if err != nil {
		return nil, "", err
	}
	return s, job, nil
}

// dir resolves the spool directory the way docs/contract.md says.
func dir(c *cli.Call) string {
	return spool.Locate(c.String("spool"), c.Getenv, os.Getuid())
}

// open opens the existing spool; a missing one is bad input (exit 2),
// never created here.
func open(c *cli.Call) (*spool.Spool, error) {
	s, err := spool.Open(dir(c))
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return s, nil
}

// age prints a duration the way ls does: 12s, 5m, 3h, 4d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// line makes text fit one line of a table, escaped for a terminal
// (spool.Printable): it may be anyone's who can write the spool.
func line(s string) string {
	return spool.Printable(strings.Join(strings.Fields(s), " "))
}
