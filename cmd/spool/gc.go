package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var gcCmd = cli.Command{
	Name:  "gc",
	Usage: "[--older D] [--dry-run]",
	Short: "For cron, remove the files of jobs that ended more than D ago.",
	Long: `D is 7d by default (0: everything ended), judged by the result's mtime; the files are the
spec, result, events, log and cancel. Never a queued, new or running
job's. Then removes progress/<chat> and chats/<chat>/ of chats that no
live job names, when they are older than D too. Prints each name
removed, one a line; with --dry-run, what would be, removing nothing.`,
	Flags: func(fs *flag.FlagSet) {
		cli.Duration(fs, "older", spool.DefaultGCAge, "remove what ended more than `D` ago (45m, 2h, 7d)")
		fs.Bool("dry-run", false, "print what would be removed, and remove nothing")
	},
	Run: gc,
}

func gc(c *cli.Call) error {
	if err := c.NoOperands(); err != nil {
		return err
	}
	older := c.Duration("older")
	switch {
	case older < 0:
		return c.Usagef("--older %s: want 0 (everything ended) or more", older)
	case older == 0:
		// 0 is now: everything ended goes (the package's zero would be
		// its default, 7 days).
		older = time.Nanosecond
	}
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.GC(spool.GCOptions{Older: older, DryRun: c.Bool("dry-run")}, func(name string) {
		fmt.Fprintln(c.Stdout, spool.Printable(name))
	})
}
