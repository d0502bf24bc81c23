package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func testApp(env map[string]string) (*app, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}, &out, &errb
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"45m", 45 * time.Minute, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"90", 90 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"1h30m", 90 * time.Minute, true},
		{"-1s", 0, false},
		{"soon", 0, false},
		{"d", 0, false},
	} {
		d, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || d != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v", tc.in, d, err)
		}
	}
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
	a, _, _ := testApp(nil)
	c := a.newCommand("x", "usage")
	j := c.Bool("json", false, "")
	pos, err := c.parse([]string{"JOB", "--json", "--", "-v", "--json"})
	if err != nil || !*j || strings.Join(pos, " ") != "JOB -v --json" {
		t.Errorf("parse = %q, %v, json %v", pos, err, *j)
	}
	if _, err := a.newCommand("x", "").parse([]string{"--nope"}); codeOf(err) != 2 {
		t.Errorf("unknown flag: %v (code %d)", err, codeOf(err))
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
		a, _, errb := testApp(env)
		if got := a.run(tc.args); got != tc.code {
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
				a, _, errb := testApp(env)
				a.stdout = io.Discard
				if code := a.run(args); code != 0 {
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
