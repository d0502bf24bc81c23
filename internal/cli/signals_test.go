package cli

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestSignalsTwoStages(t *testing.T) {
	s := CatchSignals()
	defer s.Stop()
	if s.First() != nil || s.ExitCode() != ExitFail {
		t.Fatalf("before a signal: %v %d", s.First(), s.ExitCode())
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	select {
	case <-s.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not cancel the context")
	}
	select {
	case <-s.Now():
		t.Fatal("Now closed after one signal")
	default:
	}
	if s.First() != syscall.SIGTERM || s.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("first = %v, code %d", s.First(), s.ExitCode())
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	select {
	case <-s.Now():
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not close Now")
	}
}

func TestSignalsStopTwice(t *testing.T) {
	s := CatchSignals()
	s.Stop()
	s.Stop()
	<-s.Context().Done()
}

func TestErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{nil, ExitOK},
		{fmt.Errorf("show: %w", spool.ErrInvalidID), ExitUsage},
		{Usagef("bad %d", 1), ExitUsage},
		{Failf(ExitTimeout, "late"), ExitTimeout},
		{&Error{Msg: "zero"}, ExitFail},
		{syscall.ENOENT, ExitFail},
	} {
		if got := Code(c.err); got != c.code {
			t.Errorf("Code(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}

func TestReport(t *testing.T) {
	var b strings.Builder
	if c := Report(&b, "x", Exit(ExitTimeout)); c != ExitTimeout || b.Len() != 0 {
		t.Fatalf("Exit: %d %q", c, b.String())
	}
	if c := Report(&b, "spool ls", Usagef("bad\nflag")); c != ExitUsage || b.String() != "spool ls: bad flag\n" {
		t.Fatalf("Usagef: %d %q", c, b.String())
	}
}

func TestSignalsHooks(t *testing.T) {
	s := CatchSignals()
	var got []string
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	<-s.Context().Done()
	// The first came before the hooks were set: OnSignal calls it.
	s.OnSignal(func(sig os.Signal) { got = append(got, "first "+sig.String()) }, func() { got = append(got, "second") })
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	<-s.Now()
	s.Stop() // waits for the second hook
	if strings.Join(got, ",") != "first terminated,second" {
		t.Fatalf("hooks: %q", got)
	}
}
