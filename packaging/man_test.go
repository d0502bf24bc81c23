package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		synopsis   []string
		body0      string // the first line of the body
		err        bool
	}{
		{"spool", "usage: spool [--spool DIR] COMMAND [flags] [args]\n\nThe shell's view.\n",
			[]string{"spool [--spool DIR] COMMAND [flags] [args]"}, "The shell's view.", false},
		{"spoold", "usage: spoold [--spool DIR] [--workers N]\n              [--host NAME]\n\nRuns the queue.\n",
			[]string{"spoold [--spool DIR] [--workers N]", "       [--host NAME]"}, "Runs the queue.", false},
		{"watchd", "usage:\n  watchd follow --chat C\n  watchd serve [--listen ADDR]\n\nfollow prints\n",
			[]string{"watchd follow --chat C", "watchd serve [--listen ADDR]"}, "follow prints", false},
		{"watchd follow", "usage: watchd follow --chat C\n  -chat chat\n    \tthe chat\n",
			[]string{"watchd follow --chat C"}, "  -chat chat", false},
		{"spool submit", "usage: spool submit --chat C -- ARGV...\n       spool submit --spec FILE|-\n\nQueues a job.\n",
			[]string{"spool submit --chat C -- ARGV...", "spool submit --spec FILE|-"}, "Queues a job.", false},
		{"refactored", "Usage: x [flags]\n", []string{"x [flags]"}, "", false},
		{"no usage", "x: unknown flag -h\n", nil, "", true},
		{"empty synopsis", "usage:\n\nnothing\n", nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := parseUsage(tc.name, tc.text)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want an error: %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if strings.Join(u.synopsis, "|") != strings.Join(tc.synopsis, "|") {
				t.Errorf("synopsis %q, want %q", u.synopsis, tc.synopsis)
			}
			var body0 string
			if len(u.body) > 0 {
				body0 = u.body[0]
			}
			if body0 != tc.body0 {
				t.Errorf("body starts %q, want %q", body0, tc.body0)
			}
		})
	}
}

func TestSubcommandCandidates(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"spool", "usage: spool COMMAND\n\nCommands:\n\n  submit --chat C   queue\n  ls [--json]   list\n  submit --spec F\n\nThe spool is.\n", "submit ls"},
		{"watchd", "usage:\n  watchd follow --chat C\n  watchd serve\n\nfollow prints\n", "follow serve"},
		// Go's flag listings and deep continuation lines are no commands.
		{"spoold", "usage: spoold [--workers N]\n\nRuns.\n\n  -workers int\n    \tthe jobs run at once\n", ""},
		{"vmgate", "usage: vmgate COMMAND\n\n  run [--shell SH]  decide, then\n                    run it only if allowed\n  --spool DIR   the spool\n", "run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := parseUsage(tc.name, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(subcommandCandidates(tc.name, u), " "); got != tc.want {
				t.Errorf("candidates %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWhatis(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"The shell's view of the job spool (docs/contract.md). Commands:", "the shell's view of the job spool"},
		{"Runs the spool's queue until SIGTERM or SIGINT; then stops\nclaiming.", "runs the spool's queue until SIGTERM or SIGINT"},
		{"Refuses git writes in scripts before they reach the machine (docs/gate.md).", "refuses git writes in scripts before they reach the machine"},
		{"SIGTERM stops it.", "SIGTERM stops it"},
		{"  -flag int\n    \tonly flags", "a command of vmspool, the job spool"},
	} {
		c := command{name: "x", top: usage{synopsis: []string{"x"}, body: strings.Split(tc.body, "\n")}}
		if got := whatis(c); got != tc.want {
			t.Errorf("whatis of %q = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// A usage's text never becomes a roff request: lines that start with a
// dot or a quote are escaped, and so are backslashes.
func TestRoffEscapes(t *testing.T) {
	c := command{name: "x", top: usage{synopsis: []string{"x [-v]"},
		body: []string{".SH not a section", "'also not", `a \fBbackslash`, "  .indented", "  -flag int", "    \t.starts with a dot"}}}
	page := string(roff(c, page{version: "1.0", date: time.Unix(0, 0)}))
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, ".SH not") || strings.HasPrefix(l, "'also") || strings.HasPrefix(l, ".starts") {
			t.Errorf("usage text became a request: %q", l)
		}
	}
	if strings.Contains(page, `\fBbackslash`) {
		t.Errorf("a backslash of the usage reached roff as one:\n%s", page)
	}
	if !strings.Contains(page, ".TH X 1 1970-01-01 \"vmspool 1.0\" \"vmspool\"\n") {
		t.Errorf("no .TH line:\n%s", page)
	}
}

func FuzzRoff(f *testing.F) {
	f.Add("usage: x [-v]\n\nText.\n  -v\n    \tverbose\n  table  row\n")
	f.Add("usage:\n  x a\n  x b\n\n.x\n'y\n\\z\n")
	f.Fuzz(func(t *testing.T, text string) {
		u, err := parseUsage("x", text)
		if err != nil {
			return
		}
		page := roff(command{name: "x", top: u}, page{version: "v", date: time.Unix(0, 0)})
		requests := regexp.MustCompile(`^(\.(\\"|TH|SH|SS|PP|TP|RS|RE|nf|fi|BR)( |$)|$)`)
		for _, l := range strings.Split(string(page), "\n") {
			if (strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'")) && !requests.MatchString(l) {
				t.Fatalf("the usage %q made a request of its own: %q", text, l)
			}
		}
	})
}

// TestManPages writes the pages of the real commands, built here from
// the checkout, and checks that each says what the command's -h says:
// every subcommand its own section, every flag of every -h in the page,
// and no warning from groff.
func TestManPages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the four commands")
	}
	bin := t.TempDir()
	var bins []string
	for _, c := range commands {
		bins = append(bins, filepath.Join(bin, c))
	}
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/spool", "./cmd/spoold", "./cmd/watchd", "./cmd/vmgate")
	build.Dir = ".." // the binaries' own module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pages, err := manPages(bins, page{version: "test", date: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	// At least these (a new subcommand adds itself to its page).
	wantSubs := map[string][]string{
		"spool":  {"submit", "ls", "show", "cancel", "requeue", "answer", "say", "ask", "gc", "fsck"},
		"spoold": nil,
		"watchd": {"follow", "serve"},
		"vmgate": {"check", "run", "serve"},
	}
	// Each page's summary is its command's Short, the line after the
	// synopsis of its -h (watchd's once said what `follow` does).
	wantWhatis := map[string]string{
		"spool":  "the shell's view of the job spool",
		"spoold": "runs the spool's queue until SIGTERM or SIGINT",
		"watchd": "relays the progress of a chat's run, to a terminal or over HTTP",
		"vmgate": "refuses git writes in scripts before they reach the machine",
	}
	flagName := regexp.MustCompile(`(?m)^  (-[a-z][a-z0-9-]*)`)
	for _, c := range commands {
		page := string(pages[c])
		if want := ".SH NAME\n" + esc(c) + ` \- ` + esc(wantWhatis[c]) + "\n"; !strings.Contains(page, want) {
			t.Errorf("%s(1): no NAME line %q", c, want)
		}
		subs := regexp.MustCompile(`(?m)^\.SS `+c+` (\S+)$`).FindAllStringSubmatch(page, -1)
		got := map[string]bool{}
		var all []string
		for _, s := range subs {
			got[s[1]] = true
			all = append(all, s[1])
		}
		for _, sub := range wantSubs[c] {
			if !got[sub] {
				t.Errorf("%s(1) has no section for %s %s; it has %q", c, c, sub, all)
			}
		}
		if wantSubs[c] == nil && len(all) > 0 {
			t.Errorf("%s(1) has subcommands %q; %s has none", c, all, c)
		}
		for _, sub := range append([]string{""}, all...) {
			args := []string{"-h"}
			if sub != "" {
				args = []string{sub, "-h"}
			}
			out, _ := exec.Command(filepath.Join(bin, c), args...).CombinedOutput()
			for _, m := range flagName.FindAllStringSubmatch(string(out), -1) {
				if !strings.Contains(page, `\fB`+esc(m[1])+`\fR`) {
					t.Errorf("%s(1) lacks %s %s's flag %s", c, c, sub, m[1])
				}
			}
		}
		if _, err := exec.LookPath("groff"); err == nil {
			g := exec.Command("groff", "-man", "-ww", "-z")
			g.Stdin = bytes.NewReader(pages[c])
			if out, err := g.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff on %s(1): %v\n%s", c, err, out)
			}
		}
		if os.Getenv("VMSPOOL_MAN_SHOW") != "" {
			t.Logf("%s(1):\n%s", c, page)
		}
	}
}
