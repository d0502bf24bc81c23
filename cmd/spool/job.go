package main

import (
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

// jobEnv is the job a command runs inside of (say, ask), from the
// variables spoold sets: SPOOL_DIR (or --spool) and SPOOL_JOB, or else
// SPOOL_EVENTS alone.
type jobEnv struct {
	s    *spool.Spool
	job  string
	chat string
}

func inJob(c *cli.Call) (*jobEnv, error) {
	dir, job := c.String("spool"), c.Getenv("SPOOL_JOB")
	if dir == "" {
		dir = c.Getenv("SPOOL_DIR")
	}
	if job == "" || dir == "" {
		ev := c.Getenv("SPOOL_EVENTS")
		if ev == "" {
			return nil, cli.Failf(cli.ExitUsage, "not inside a job: set SPOOL_DIR and SPOOL_JOB, or SPOOL_EVENTS (spoold sets them for every job)")
		}
		j, ext, ok := spool.SplitName(baseOf(ev))
		if !ok || ext != spool.ExtEvents {
			return nil, cli.Failf(cli.ExitUsage, "SPOOL_EVENTS=%s: not the path of a <job>.events", ev)
		}
		if job == "" {
			job = j
		}
		if dir == "" {
			dir = dirOf(ev)
		}
	}
	if err := spool.CheckJobID(job); err != nil {
		return nil, cli.Usagef("SPOOL_JOB: %v", err)
	}
	s, err := spool.Open(dir)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return &jobEnv{s: s, job: job, chat: c.Getenv("SPOOL_CHAT")}, nil
}

func baseOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	} else if i == 0 {
		return "/"
	}
	return "."
}
