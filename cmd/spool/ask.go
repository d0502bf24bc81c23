package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

const askUsage = `usage: spool ask [--options a,b] [--allow-empty] [--timeout D] TEXT

Inside a job: asks the person TEXT (a question event with a fresh id),
waits for chats/<chat>/answer.json to answer that id, and prints the
answer. An answer to another question is ignored. With --options the
answer is one of them; with --allow-empty an empty answer is one (else
it is refused when given). Exit 124 on --timeout.
`

// askPoll is the safety net beside the watch, for filesystems whose
// changes inotify does not report, and the poll where inotify cannot be
// had.
const askPoll = 2 * time.Second

func (a *app) ask(args []string) error {
	c := a.newCommand("ask", askUsage)
	options := c.String("options", "", "the answers offered, `a,b,...`")
	allowEmpty := c.Bool("allow-empty", false, "an empty answer answers the question")
	var timeout durationFlag
	c.Var(&timeout, "timeout", "give up after `D` (exit 124)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	text := strings.Join(pos, " ")
	if strings.TrimSpace(text) == "" {
		return usageErr("ask", "want the question's TEXT")
	}
	var opts []string
	for _, o := range strings.Split(*options, ",") {
		if o = strings.TrimSpace(o); o != "" {
			opts = append(opts, o)
		}
	}
	j, err := a.inJob()
	if err != nil {
		return err
	}
	defer j.s.Close()
	s := j.s
	if j.chat == "" {
		sp, err := s.ReadSpec(j.job)
		if err != nil {
			return cli.Usagef("SPOOL_CHAT is not set and %v", err)
		}
		j.chat = sp.Chat
	}
	if err := spool.CheckChatID(j.chat); err != nil {
		return cli.Usagef("SPOOL_CHAT: %v", err)
	}
	w, err := watchChat(s, j.chat)
	if err != nil {
		return err
	}
	defer w.Close()
	qid := "q" + spool.NewJobID(time.Now())
	if _, err := s.AppendEvent(j.job, spool.Event{Type: spool.EventQuestion, ID: qid, Text: text, Options: opts, AllowEmpty: *allowEmpty}); err != nil {
		return err
	}
	var deadline <-chan time.Time
	if timeout.set {
		t := time.NewTimer(timeout.d)
		defer t.Stop()
		deadline = t.C
	}
	ans, err := waitAnswer(s, j.chat, j.job, qid, w, deadline)
	if err != nil {
		if errors.Is(err, errNoAnswer) {
			return fail(cli.ExitTimeout, "question %s: no answer after %s", qid, timeout.d)
		}
		return err
	}
	fmt.Fprintln(a.stdout, ans)
	return nil
}

// watchChat watches the chat's directory (a watch on answer.json would
// die at its first replacement), made if missing. It goes on before the
// question is asked, so that no answer can come between.
func watchChat(s *spool.Spool, chat string) (*spool.Watch, error) {
	w, err := s.Watch(spool.WatchConfig{Rescan: askPoll, Fallback: askPoll, Make: true}, spool.ChatDir(chat))
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", chat, err)
	}
	return w, nil
}

var errNoAnswer = errors.New("no answer")

// waitAnswer waits for the answer to question qid: looked for at each
// change of answer.json, and at each Look of the chat's directory (every
// askPoll at least: a missed event, a shared filesystem, the relayed
// answer appended to the job's events). errNoAnswer: the deadline came
// first.
//
// The answer is looked for in two places: the chat's answer.json, and the
// job's own events, where spoold relays it as an `answer` event once it
// has read it. The second is what a job on another host than the person's
// can count on: a submission of the chat clears answer.json (so that no
// later run reads it as its own), and between two polls of a shared
// filesystem that can come before the job has seen it (TestMultiHost, on
// GlusterFS: the question timed out though spoold had relayed the answer).
func waitAnswer(s *spool.Spool, chat, job, qid string, w *spool.Watch, deadline <-chan time.Time) (string, error) {
	events := s.NewEventReader(job)
	for {
		relayed, found := "", false
		events.Each(func(ev spool.Event) {
			if ev.Type == spool.EventAnswer && ev.ID == qid && !found {
				relayed, found = ev.Text, true
			}
		})
		if found {
			return relayed, nil
		}
		ans, err := s.ReadAnswer(chat)
		switch {
		case err == nil && ans.Question == qid:
			return ans.Answer, nil
		// What is not an answer (a symlink or a FIFO planted there, a
		// huge file) is waited past like a stale one: `spool answer`
		// replaces it, and spoold does not take it either.
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, spool.ErrCorrupt) &&
			!errors.Is(err, spool.ErrNotRegular) && !errors.Is(err, spool.ErrTooLarge):
			return "", err
		}
		for look := false; !look; {
			select {
			case c := <-w.C:
				look = c.Op == spool.Look || c.Name == spool.AnswerFile
			case <-deadline:
				return "", errNoAnswer
			}
		}
	}
}
