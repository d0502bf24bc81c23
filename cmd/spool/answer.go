package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var answerCmd = cli.Command{
	Name:  "answer",
	Usage: "--chat C [--question Q] TEXT",
	Short: "Answer the open question of the chat's run.",
	Long: `progress/<chat> says which question is open; the answer is written to
chats/<chat>/answer.json {job, question, answer, at}. The first answer
wins. A question with options takes one of them (in any case); an empty
TEXT ('') answers only a question asked with --allow-empty. Exit 1 if no
question is open, if --question Q is not the open one, or if it has been
answered already ("already answered: TEXT", the answer that won, also once
the run took it and after the run ended); 2 if TEXT does not answer it.`,
	Flags: func(fs *flag.FlagSet) {
		fs.String("chat", "", "the chat `C` whose run asked (required)")
		fs.String("question", "", "answer only if the open question is `Q`")
	},
	Run: answer,
}

func answer(c *cli.Call) error {
	chat, qid := c.String("chat"), c.String("question")
	if chat == "" {
		return c.Usagef("--chat is required")
	}
	if err := spool.CheckChatID(chat); err != nil {
		return err
	}
	if qid != "" {
		if err := spool.CheckQuestionID(qid); err != nil {
			return err
		}
	}
	if len(c.Args) == 0 {
		return c.Usagef("want the answer's TEXT ('' for an empty answer)")
	}
	text := strings.Join(c.Args, " ")
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.Close()
	// The rules are package spool's (AnswerQuestion), shared with
	// watchd's page: one answer document, one first answer.
	_, err = s.AnswerQuestion(chat, qid, text)
	switch {
	case errors.Is(err, spool.ErrNoQuestion), errors.Is(err, spool.ErrAnswered):
		return cli.Failf(cli.ExitFail, "%v", err)
	case errors.Is(err, spool.ErrBadAnswer):
		return cli.Failf(cli.ExitUsage, "%v", err)
	}
	return err
}
