package ops

import (
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	"golang.org/x/term"
)

// Logger builds the logrus logger of a daemon: text when w is a terminal,
// JSON otherwise (journald, files, pipes), so a person and a log shipper
// each get what they read. It lives here rather than in internal/cli so
// that `spool`, which logs nothing, does not link logrus (README, "Performance").
func Logger(w io.Writer, level string) (*logrus.Logger, error) {
	l := logrus.New()
	l.SetOutput(w)
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	} else {
		l.SetFormatter(&logrus.JSONFormatter{})
	}
	if level == "" {
		level = "info"
	}
	lv, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	l.SetLevel(lv)
	return l, nil
}

// Discard is a logger that says nothing: what a daemon's package logs to
// when its caller gives it no logger (a test, a library use).
func Discard() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}
