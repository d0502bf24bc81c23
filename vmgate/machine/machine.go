// Package machine runs a script the gate allowed: `vmgate run` and the
// gate's daemon (package server) hand it one. It is apart from package
// vmgate, as mvdan.cc/sh runs shell in interp apart from parsing it in
// syntax: the decision touches nothing, this package starts processes.
// It decides nothing: it must only ever be handed an allowed script.
package machine

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
)

// ExitNotStarted is the exit code reported when the machine's shell could
// not be started at all, as a shell reports a command it cannot find.
const ExitNotStarted = 127

// Machine is where an allowed script runs. The gate decides first; a
// Machine is only ever handed a script the gate allowed.
type Machine struct {
	// Shell runs the script as `Shell -c SCRIPT` (default bash), so that
	// the script keeps the caller's standard input.
	Shell string
	// Command, when set, wins over Shell: it is run with `sh -c Command`
	// and receives the script on its standard input, e.g. `ssh vm bash -s`.
	Command string
	// OwnGroup runs the script in a process group of its own, so that a
	// stopped run takes all its processes with it (a daemon wants this; a
	// person at a terminal running `vmgate run` keeps job control).
	OwnGroup bool
}

// Run runs script and returns its exit status: the shell's exit code, or
// 128+N when a signal N ended it, or ExitNotStarted (with the error) when
// the shell could not be started.
func (m Machine) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var cmd *exec.Cmd
	if strings.TrimSpace(m.Command) != "" {
		cmd = exec.CommandContext(ctx, "sh", "-c", m.Command)
		cmd.Stdin = strings.NewReader(script)
	} else {
		shell := m.Shell
		if shell == "" {
			shell = "bash"
		}
		cmd = exec.CommandContext(ctx, shell, "-c", script)
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if m.OwnGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	} else {
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	}
	err := cmd.Run()
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return ExitNotStarted, err
}
