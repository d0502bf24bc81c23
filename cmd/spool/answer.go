package main

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

const answerUsage = `usage: spool answer --chat C [--question Q] TEXT

Answers the open question of the chat's run (progress/<chat> says which):
writes chats/<chat>/answer.json {job, question, answer, at}. Exit 1 if no
question is open, or if --question Q is not the open one.
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
		return usageErr("answer", "want the answer's TEXT")
	}
	text := strings.Join(pos, " ")
	s, err := a.open()
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := s.ReadProgress(*chat)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(cli.ExitFail, "chat %s: no question is open (no run in progress)", *chat)
	}
	if err != nil {
		return err
	}
	q := p.Question
	switch {
	case q == nil || p.Done:
		return fail(cli.ExitFail, "chat %s: no question is open (job %s is %s)", *chat, p.Job, p.State)
	case *qid != "" && q.ID != *qid:
		return fail(cli.ExitFail, "chat %s: question %s is not open (the open one is %s: %s)", *chat, *qid, q.ID, line(q.Text))
	}
	return s.WriteAnswer(*chat, &spool.Answer{Job: p.Job, Question: q.ID, Answer: text})
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
