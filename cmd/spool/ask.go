package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var askCmd = cli.Command{
	Name:  "ask",
	Usage: "[--options a,b] [--allow-empty] [--timeout D] TEXT",
	Short: "Inside a job, ask the person TEXT, wait for the answer and print it.",
	Long: `The question is an event with a fresh id; the answer is the one
chats/<chat>/answer.json gives that id (or spoold relays into the job's
events). An answer to another question is ignored. With --options the
answer is one of them; with --allow-empty an empty answer is one (else
it is refused when given). Exit 124 on --timeout.`,
	Flags: func(fs *flag.FlagSet) {
		fs.String("options", "", "the answers offered, `a,b,...`")
		fs.Bool("allow-empty", false, "an empty answer answers the question")
		cli.Duration(fs, "timeout", 0, "give up after `D` (exit 124)")
	},
	Run: ask,
}

// askPoll is the safety net beside the watch, for filesystems whose
// changes inotify does not report, and the poll where inotify cannot be
// had.
const askPoll = 2 * time.Second

func ask(c *cli.Call) error {
	text := strings.Join(c.Args, " ")
	if strings.TrimSpace(text) == "" {
		return c.Usagef("want the question's TEXT")
	}
	var opts []string
	for _, o := range strings.Split(c.String("options"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			opts = append(opts, o)
		}
	}
	j, err := inJob(c)
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
	if _, err := s.AppendEvent(j.job, spool.Event{Type: spool.EventQuestion, ID: qid, Text: text, Options: opts, AllowEmpty: c.Bool("allow-empty")}); err != nil {
		return err
	}
	var deadline <-chan time.Time
	timeout := c.Duration("timeout")
	if c.IsSet("timeout") {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	ans, relayed, err := waitAnswer(s, j.chat, j.job, qid, w, deadline)
	if err != nil {
		if errors.Is(err, errNoAnswer) {
			return cli.Failf(cli.ExitTimeout, "question %s: no answer after %s", qid, timeout)
		}
		return err
	}
	if !relayed {
		// Taken from answer.json before spoold relayed it: the answer
		// event is ask's to append, as the relay would have, since the
		// relay looks only at the run's open question, and the job may ask
		// its next one before spoold reads the file. AppendAnswer writes
		// it unless the relay has meanwhile: one event a question. It
		// names the run's worker and attempt, as the relay's does, when
		// the lease says them.
		ev := spool.Event{Type: spool.EventAnswer, ID: qid, Text: ans}
		if l, _, err := s.ReadLease(j.job); err == nil {
			ev.Worker, ev.Attempt = l.Worker, l.Attempt
		}
		if _, _, err := s.AppendAnswer(j.job, ev); err != nil {
			// The job has its answer; only the record of it is missing.
			fmt.Fprintf(c.Stderr, "%s: question %s: the answer is not in the job's events: %s\n", c.Name(), qid, spool.Printable(err.Error()))
		}
	}
	fmt.Fprintln(c.Stdout, ans)
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
// answer appended to the job's events). relayed says the answer came from
// the job's events (an answer event is there already). errNoAnswer: the
// deadline came first.
//
// The answer is looked for in two places: the chat's answer.json, and the
// job's own events, where spoold relays it as an `answer` event once it
// has read it. The second is what a job on another host than the person's
// can count on: a submission of the chat clears answer.json (so that no
// later run reads it as its own), and between two polls of a shared
// filesystem that can come before the job has seen it (TestMultiHost, on
// GlusterFS: the question timed out though spoold had relayed the answer).
func waitAnswer(s *spool.Spool, chat, job, qid string, w *spool.Watch, deadline <-chan time.Time) (ans string, relayed bool, err error) {
	events := s.NewEventReader(job)
	for {
		text, found := "", false
		events.Each(func(ev spool.Event) {
			if ev.Type == spool.EventAnswer && ev.ID == qid && !found {
				text, found = ev.Text, true
			}
		})
		if found {
			return text, true, nil
		}
		a, err := s.ReadAnswer(chat)
		switch {
		case err == nil && a.Question == qid:
			return a.Answer, false, nil
		// What is not an answer (a symlink or a FIFO planted there, a
		// huge file) is waited past like a stale one: `spool answer`
		// replaces it, and spoold does not take it either.
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, spool.ErrCorrupt) &&
			!errors.Is(err, spool.ErrNotRegular) && !errors.Is(err, spool.ErrTooLarge):
			return "", false, err
		}
		for look := false; !look; {
			select {
			case c := <-w.C:
				look = c.Op == spool.Look || c.Name == spool.AnswerFile
			case <-deadline:
				return "", false, errNoAnswer
			}
		}
	}
}
