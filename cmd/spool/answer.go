package main

import (
	"errors"
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

const answerUsage = `usage: spool answer --chat C [--question Q] TEXT

Answers the open question of the chat's run (progress/<chat> says which):
writes chats/<chat>/answer.json {job, question, answer, at}. The first
answer wins. A question with options takes one of them (in any case); an
empty TEXT ('') answers only a question asked with --allow-empty.
Exit 1 if no question is open, if --question Q is not the open one, or if
it has been answered already; 2 if TEXT does not answer it.
`

func (a *app) answer(args []string) error {
	c := a.newCommand("answer", answerUsage)
	chat := c.String("chat", "", "the chat `C` whose run asked (required)")
	qid := c.String("question", "", "answer only if the open question is `Q`")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if *chat == "" {
		return usageErr("answer", "--chat is required")
	}
	if err := spool.CheckChatID(*chat); err != nil {
		return err
	}
	if *qid != "" {
		if err := spool.CheckQuestionID(*qid); err != nil {
			return err
		}
	}
	if len(pos) == 0 {
		return usageErr("answer", "want the answer's TEXT ('' for an empty answer)")
	}
	text := strings.Join(pos, " ")
	s, err := a.open()
	if err != nil {
		return err
	}
	defer s.Close()
	// The rules are package spool's (AnswerQuestion), shared with
	// watchd's page: one answer document, one first answer.
	_, err = s.AnswerQuestion(*chat, *qid, text)
	switch {
	case errors.Is(err, spool.ErrNoQuestion), errors.Is(err, spool.ErrAnswered):
		return fail(cli.ExitFail, "%v", err)
	case errors.Is(err, spool.ErrBadAnswer):
		return fail(cli.ExitUsage, "%v", err)
	}
	return err
}

// jobEnv is the job a command runs inside of, from the variables spoold
// sets: SPOOL_DIR (or --spool) and SPOOL_JOB, or else SPOOL_EVENTS alone.
type jobEnv struct {
	s    *spool.Spool
	job  string
	chat string
}

func (a *app) inJob() (*jobEnv, error) {
	dir, job := a.spoolFlag, a.getenv("SPOOL_JOB")
	if dir == "" {
		dir = a.getenv("SPOOL_DIR")
	}
	if job == "" || dir == "" {
		ev := a.getenv("SPOOL_EVENTS")
		if ev == "" {
			return nil, fail(cli.ExitUsage, "not inside a job: set SPOOL_DIR and SPOOL_JOB, or SPOOL_EVENTS (spoold sets them for every job)")
		}
		j, ext, ok := spool.SplitName(baseOf(ev))
		if !ok || ext != spool.ExtEvents {
			return nil, fail(cli.ExitUsage, "SPOOL_EVENTS=%s: not the path of a <job>.events", ev)
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
	return &jobEnv{s: s, job: job, chat: a.getenv("SPOOL_CHAT")}, nil
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

const sayUsage = `usage: spool say TEXT

Inside a job: appends a status event with TEXT to the job's events, which
spoold relays to the chat. Needs SPOOL_DIR and SPOOL_JOB, or SPOOL_EVENTS.
`

func (a *app) say(args []string) error {
	c := a.newCommand("say", sayUsage)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	text := strings.Join(pos, " ")
	if strings.TrimSpace(text) == "" {
		return usageErr("say", "want a TEXT to say")
	}
	j, err := a.inJob()
	if err != nil {
		return err
	}
	defer j.s.Close()
	_, err = j.s.AppendEvent(j.job, spool.Event{Type: spool.EventStatus, Text: text})
	return err
}
