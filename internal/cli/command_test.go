package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// testProgram is a program of two commands, as the four binaries are
// made.
func testProgram(got *[]string) *Program {
	p := &Program{Name: "x", Usage: "[--spool DIR] COMMAND", Short: "A test program.",
		Common: func(fs *flag.FlagSet) { fs.String("spool", "", "the spool `DIR`") }}
	p.Register(Command{Name: "echo", Usage: "[--n N] ARGS...", Short: "Say the operands.", Long: "More.",
		Flags: func(fs *flag.FlagSet) {
			fs.Int("n", 1, "times")
			Duration(fs, "wait", 0, "a duration")
		},
		Run: func(c *Call) error {
			*got = append(*got, c.String("spool"), strings.Join(c.Args, ","), c.Duration("wait").String())
			if c.Int("n") == 0 {
				return c.Usagef("--n must not be 0")
			}
			return nil
		}})
	p.Register(Command{Name: "fail", Short: "Fail with a code.", Run: func(c *Call) error {
		switch c.Args[0] {
		case "quiet":
			return Exit(ExitTimeout)
		case "plain":
			return errors.New("broken\nin two")
		}
		return Failf(ExitFail, "said")
	}})
	return p
}

func TestProgramRun(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // substrings; stderr "": nothing at all
		got            string // what Run saw; "": not checked
	}{
		{[]string{"-h"}, 0, "Commands:\n  echo  Say the operands.\n  fail  Fail with a code.\n", "", ""},
		{[]string{"help"}, 0, "usage: x [--spool DIR] COMMAND\n\nA test program.\n", "", ""},
		{[]string{"--version"}, 0, "x ", "", ""},
		{[]string{"echo", "--version"}, 0, "x ", "", ""},
		{[]string{"echo", "-h"}, 0, "usage: x echo [--n N] ARGS...\n\nSay the operands.\n\nMore.\n\nFlags:\n", "", ""},
		{[]string{}, 2, "", "usage: x", ""},
		{[]string{"nope"}, 2, "", "x: unknown command \"nope\" (see 'x -h')\n", ""},
		{[]string{"--bogus", "echo"}, 2, "", "x: flag provided but not defined: -bogus (see 'x -h')\n", ""},
		{[]string{"echo", "--bogus"}, 2, "", "x echo: flag provided but not defined: -bogus (see 'x echo -h')\n", ""},
		{[]string{"echo", "--wait", "-1s"}, 2, "", "(see 'x echo -h')\n", ""},
		{[]string{"echo", "--n", "0"}, 2, "", "x echo: --n must not be 0 (see 'x echo -h')\n", "||0s"},
		{[]string{"--spool", "S", "echo", "a", "--wait", "7d", "--", "--n", "0"}, 0, "", "", "S|a,--n,0|168h0m0s"},
		{[]string{"echo", "--spool=T", "b"}, 0, "", "", "T|b|0s"},
		{[]string{"fail", "quiet"}, 124, "", "", ""},
		{[]string{"fail", "plain"}, 1, "", "x fail: broken in two\n", ""},
		{[]string{"fail", "said"}, 1, "", "x fail: said\n", ""},
	} {
		var got []string
		var out, errb strings.Builder
		code := testProgram(&got).Run(tc.args, IO{Stdout: &out, Stderr: &errb})
		if code != tc.code {
			t.Errorf("x %q: exit %d, want %d (%q)", tc.args, code, tc.code, errb.String())
		}
		if !strings.Contains(out.String(), tc.stdout) {
			t.Errorf("x %q: stdout %q, want %q in it", tc.args, out.String(), tc.stdout)
		}
		if !strings.Contains(errb.String(), tc.stderr) || tc.stderr == "" && errb.Len() > 0 {
			t.Errorf("x %q: stderr %q, want %q", tc.args, errb.String(), tc.stderr)
		}
		if g := strings.Join(got, "|"); tc.got != "" && g != tc.got {
			t.Errorf("x %q: Run saw %q, want %q", tc.args, g, tc.got)
		}
	}
}

// One command alone is the program: no command word, its flags first.
func TestProgramSingle(t *testing.T) {
	p := &Program{Name: "d"}
	var wait time.Duration
	p.Register(Command{Usage: "[--wait D]\n  [--more]", Short: "Runs alone.",
		Flags: func(fs *flag.FlagSet) { Duration(fs, "wait", time.Second, "") },
		Run:   func(c *Call) error { wait = c.Duration("wait"); return c.NoOperands() }})
	var out, errb strings.Builder
	if code := p.Run([]string{"--wait", "2s"}, IO{Stdout: &out, Stderr: &errb}); code != 0 || wait != 2*time.Second {
		t.Errorf("d --wait 2s: exit %d, wait %v, %q", code, wait, errb.String())
	}
	if code := p.Run([]string{"extra"}, IO{Stdout: &out, Stderr: &errb}); code != 2 || errb.String() != "d: unexpected argument \"extra\" (see 'd -h')\n" {
		t.Errorf("d extra: exit %d, %q", code, errb.String())
	}
	out.Reset()
	if code := p.Run([]string{"-h"}, IO{Stdout: &out, Stderr: &errb}); code != 0 || !strings.HasPrefix(out.String(), "usage: d [--wait D]\n         [--more]\n\nRuns alone.\n") {
		t.Errorf("d -h: exit %d, %q", code, out.String())
	}
}

func TestRegisterRefuses(t *testing.T) {
	run := func(*Call) error { return nil }
	for _, tc := range []struct {
		name string
		cmds []Command
	}{
		{"twice", []Command{{Name: "a", Short: "A.", Run: run}, {Name: "a", Short: "A.", Run: run}}},
		{"no short", []Command{{Name: "a", Run: run}}},
		{"a colon in short", []Command{{Name: "a", Short: "A: b", Run: run}}},
		{"no run", []Command{{Name: "a", Short: "A."}}},
		{"bad name", []Command{{Name: "A b", Short: "A.", Run: run}}},
		{"unnamed beside named", []Command{{Name: "a", Short: "A.", Run: run}, {Short: "B.", Run: run}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", tc.name)
				}
			}()
			p := &Program{Name: "x"}
			for _, c := range tc.cmds {
				p.Register(c)
			}
		}()
	}
}
