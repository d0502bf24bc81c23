// Package cli holds what the four commands share: the version line, the
// logging setup and the one-line error exit. It has no flags of its own.
package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/sirupsen/logrus"
	"golang.org/x/term"
)

// Exit codes shared by every command (docs/contract.md).
const (
	ExitOK      = 0
	ExitFail    = 1
	ExitUsage   = 2
	ExitTimeout = 124
)

// Version returns "name version (revision)" from the build information, so
// that a binary says which commit it was built from.
func Version(name string) string {
	v, rev, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		if dirty {
			rev += "-dirty"
		}
		return fmt.Sprintf("%s %s (%s)", name, v, rev)
	}
	return fmt.Sprintf("%s %s", name, v)
}

// Logger builds the logrus logger of a daemon: text when w is a terminal,
// JSON otherwise (journald, files, pipes), so a person and a log shipper
// each get what they read.
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

// Fatalf prints "name: message" on stderr as one line and exits with code.
func Fatalf(name string, code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, fmt.Sprintf(format, args...))
	os.Exit(code)
}
