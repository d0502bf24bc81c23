package main

import (
	"fmt"

	"github.com/vmspool/vmspool/spool"
)

const gcUsage = `usage: spool gc [--older D] [--dry-run]

For cron: removes the files of jobs that ended more than D ago (default 7d,
judged by the result's mtime): spec, result, events, log, cancel. Never a
queued, new or running job's. Then removes progress/<chat> and chats/<chat>/
of chats that no live job names, when they are older than D too. Prints
each name removed, one a line; with --dry-run, what would be, removing
nothing.
`

func (a *app) gc(args []string) error {
	c := a.newCommand("gc", gcUsage)
	older := durationFlag{d: spool.DefaultGCAge}
	c.Var(&older, "older", "remove what ended more than `D` ago (45m, 2h, 7d; default 7d)")
	dry := c.Bool("dry-run", false, "print what would be removed, and remove nothing")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("gc", "unexpected argument %q", pos[0])
	}
	s, err := a.open()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.GC(spool.GCOptions{Older: older.d, DryRun: *dry}, func(name string) {
		fmt.Fprintln(a.stdout, name)
	})
}
