package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vmspool/vmspool/spool"
)

// Error is how a command fails: a message said on one line and the exit
// code it ends with. An empty message says nothing (an exit code that is
// itself the answer: a followed run that failed, a timeout). Every command
// returns one, or a plain error (Code), and Program.Run alone reports it.
type Error struct {
	Code int    // the exit code; 0 is taken as ExitFail
	Msg  string // one line; newlines are folded when reported
}

func (e *Error) Error() string { return e.Msg }

// Usagef is a usage error or bad input: exit ExitUsage.
func Usagef(format string, args ...any) error {
	return &Error{ExitUsage, fmt.Sprintf(format, args...)}
}

// Failf is a failure with the given exit code.
func Failf(code int, format string, args ...any) error {
	return &Error{code, fmt.Sprintf(format, args...)}
}

// Code is the exit code of err: ExitOK for nil, an *Error's
// own code, ExitUsage for bad input package spool refused (an invalid id,
// a document that does not parse, a missing spool, a link or a huge file
// where a document should be: docs/contract.md's exit 2), ExitFail for
// anything else.
func Code(err error) int {
	var e *Error
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		if e.Code != 0 {
			return e.Code
		}
		return ExitFail
	case errors.Is(err, spool.ErrInvalidID), errors.Is(err, spool.ErrCorrupt), errors.Is(err, spool.ErrNoSpool),
		errors.Is(err, spool.ErrNotRegular), errors.Is(err, spool.ErrTooLarge):
		return ExitUsage
	}
	return ExitFail
}

// Exit is an exit code said by itself, with no message.
func Exit(code int) error { return &Error{Code: code} }

// Report says err on w as one line, "prefix: message", and returns its
// exit code (Code). nil and an empty message say nothing. The message is
// escaped for a terminal (spool.Printable): an error may quote the tree
// (a question's options, a document's field), which anyone who can write
// the spool wrote.
func Report(w io.Writer, prefix string, err error) int {
	if err == nil {
		return ExitOK
	}
	if err.Error() == "" {
		return Code(err)
	}
	fmt.Fprintf(w, "%s: %s\n", prefix, spool.Printable(strings.Join(strings.Fields(err.Error()), " ")))
	return Code(err)
}
