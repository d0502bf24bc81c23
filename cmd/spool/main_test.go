package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

// run runs the spool command as main does, with env for its environment.
func run(env map[string]string, stdout io.Writer, args ...string) (int, *bytes.Buffer) {
	var errb bytes.Buffer
	code := prog.Run(args, cli.IO{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }})
	return code, &errb
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 12 * time.Second: "12s", 5 * time.Minute: "5m", 3 * time.Hour: "3h",
		47 * time.Hour: "47h", 4 * 24 * time.Hour: "4d",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}

// Flags may stand after the arguments; after "--" everything is ARGV.
func TestParseInterleaved(t *testing.T) {
	var got []string
	p := &cli.Program{Name: "x", Usage: "C"}
	p.Register(cli.Command{Name: "c", Short: "c", Flags: func(fs *flag.FlagSet) { fs.Bool("json", false, "") },
		Run: func(c *cli.Call) error {
			got = append(c.Args, fmt.Sprint(c.Bool("json")))
			return nil
		}})
	if code := p.Run([]string{"c", "JOB", "--json", "--", "-v", "--json"}, cli.IO{Stdout: io.Discard, Stderr: io.Discard}); code != 0 || strings.Join(got, " ") != "JOB -v --json true" {
		t.Errorf("parse = %q, exit %d", got, code)
	}
	if code := p.Run([]string{"c", "--nope"}, cli.IO{Stdout: io.Discard, Stderr: io.Discard}); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s, _ := spool.Create(dir)
	s.Close()
	env := map[string]string{"SPOOL_DIR": dir}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{}, 2},
		{[]string{"-h"}, 0},
		{[]string{"help"}, 0},
		{[]string{"--version"}, 0},
		{[]string{"ls"}, 0},
		{[]string{"ls", "-h"}, 0},
		{[]string{"show", "nosuch"}, 1},
		{[]string{"show", "../x"}, 2},
		{[]string{"cancel", "nosuch"}, 1},
		{[]string{"requeue", "nosuch"}, 1},
		{[]string{"answer", "--chat", "c", "x"}, 1},
		{[]string{"fsck"}, 0},
		{[]string{"gc"}, 0},
		{[]string{"--spool"}, 2},
		{[]string{"--spool", filepath.Join(dir, "nope"), "ls"}, 2},
	} {
		got, errb := run(env, io.Discard, tc.args...)
		if got != tc.code {
			t.Errorf("spool %q: exit %d, want %d (%s)", tc.args, got, tc.code, errb)
		}
		if n := strings.Count(errb.String(), "\n"); tc.code != 0 && len(tc.args) > 0 && n != 1 {
			t.Errorf("spool %q: %d lines on stderr: %q", tc.args, n, errb)
		}
	}
}

// BenchmarkLs is `spool ls` on a spool of 100,000 jobs, mostly ended, as
// the command does it (reading and the table), minus the process start.
func BenchmarkLs(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "spool")
	s, err := spool.Create(dir)
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	benchSpool(b, dir, 100_000)
	env := map[string]string{"SPOOL_DIR": dir}
	for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"ls", "--state", "queued"}} {
		b.Run(strings.Join(args, " "), func(b *testing.B) {
			for b.Loop() {
				if code, errb := run(env, io.Discard, args...); code != 0 {
					b.Fatal(errb)
				}
			}
		})
	}
}

func TestBrief(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, c := range []struct{ in, want string }{
		{"exit 3", "exit 3"},
		{"  two  spaces\tand tab ", "two spaces and tab"},
		{"vmgate refused `git add -A` at line 1, col 1.\nGit writes do not run in the VM.", "vmgate refused `git add -A` at line 1, col 1. …"},
		{long, strings.Repeat("x", 119) + "…"},
	} {
		if got := brief(c.in); got != c.want {
			t.Errorf("brief(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
