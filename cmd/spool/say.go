package main

import (
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var sayCmd = cli.Command{
	Name:  "say",
	Usage: "TEXT",
	Short: "Inside a job, append a status event that spoold relays to the chat.",
	Long:  `Needs SPOOL_DIR and SPOOL_JOB, or SPOOL_EVENTS (spoold sets them for every job).`,
	Run:   say,
}

func say(c *cli.Call) error {
	text := strings.Join(c.Args, " ")
	if strings.TrimSpace(text) == "" {
		return c.Usagef("want a TEXT to say")
	}
	j, err := inJob(c)
	if err != nil {
		return err
	}
	defer j.s.Close()
	_, err = j.s.AppendEvent(j.job, spool.Event{Type: spool.EventStatus, Text: text})
	return err
}
