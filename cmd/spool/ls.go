package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var lsCmd = cli.Command{
	Name:  "ls",
	Usage: "[--json] [--state S]",
	Short: "List the jobs, one line a job, oldest first.",
	Long: `Each line: id, state, chat, age (since submit), attempt, and a note (a
retry's wait, the exit or error of an ended job, a document that cannot
be read). --json prints one JSON object a line.`,
	Flags: func(fs *flag.FlagSet) {
		fs.Bool("json", false, "one JSON object a line, for scripts")
		fs.String("state", "", "only jobs in state `S` (new, queued, running, done, failed, cancelled)")
	},
	Run: ls,
}

func ls(c *cli.Call) error {
	if err := c.NoOperands(); err != nil {
		return err
	}
	var st spool.State
	if state := c.String("state"); state != "" {
		var ok bool
		if st, ok = spool.ParseState(state); !ok {
			return c.Usagef("--state %q: want new, queued, running, done, failed or cancelled", state)
		}
	}
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.Close()
	// A listing allocates a row per job and then exits: collecting garbage
	// less often is a fifth of its time on a big spool.
	debug.SetGCPercent(400)
	now := time.Now()
	rows, err := s.List(spool.ListOptions{State: st, Now: now})
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(c.Stdout, 64<<10)
	defer w.Flush()
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		for i := range rows {
			if err := enc.Encode(&rows[i]); err != nil {
				return err
			}
		}
		return nil
	}
	writeTable(w, rows, now)
	return nil
}

// writeTable prints rows as aligned columns, sized by one pass over them.
func writeTable(w *bufio.Writer, rows []spool.Row, now time.Time) {
	cells := make([][5]string, len(rows))
	notes := make([]string, len(rows))
	width := [5]int{len("JOB"), len("STATE"), len("CHAT"), len("AGE"), len("ATTEMPT")}
	for i := range rows {
		r := &rows[i]
		c := &cells[i]
		c[0], c[1], c[2] = r.Job, string(r.State), spool.Printable(r.Chat)
		if c[2] == "" {
			c[2] = "-"
		}
		c[3] = "-"
		if r.Created != 0 {
			c[3] = age(now.Sub(spool.TimeOf(r.Created)))
		}
		c[4] = "-"
		if r.Attempt > 0 {
			c[4] = strconv.Itoa(r.Attempt)
		}
		notes[i] = note(r, now)
		for k := range c {
			width[k] = max(width[k], len(c[k]))
		}
	}
	pad := func(s string, n int) {
		w.WriteString(s)
		for i := len(s); i < n+2; i++ {
			w.WriteByte(' ')
		}
	}
	head := [5]string{"JOB", "STATE", "CHAT", "AGE", "ATTEMPT"}
	for k, h := range head {
		pad(h, width[k])
	}
	w.WriteString("NOTE\n")
	for i := range cells {
		last := len(cells[i]) - 1
		for k, c := range cells[i] {
			if k == last && notes[i] == "" {
				w.WriteString(c)
				break
			}
			pad(c, width[k])
		}
		w.WriteString(notes[i])
		w.WriteByte('\n')
	}
}

func note(r *spool.Row, now time.Time) string {
	switch {
	case r.Problem != "":
		return "unreadable: " + line(r.Problem)
	case r.NotBefore != 0:
		return "retry in " + age(spool.TimeOf(r.NotBefore).Sub(now)+time.Second/2)
	case r.State == spool.Running && r.Worker != "":
		return "worker " + line(r.Worker)
	case r.Error != nil:
		return brief(*r.Error) + limitsNote(r.Limits)
	case r.Exit != nil:
		return fmt.Sprintf("exit %d", *r.Exit) + limitsNote(r.Limits)
	}
	return strings.TrimPrefix(limitsNote(r.Limits), "; ")
}

// limitsNote says that a job reached one of its limits (the whole phrase
// is in spool show).
func limitsNote(l []string) string {
	if len(l) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(l))
	for _, s := range l {
		w, _, _ := strings.Cut(s, ":")
		kinds = append(kinds, w)
	}
	return "; limit: " + strings.Join(kinds, ", ")
}

// brief is the first line of an error, cut to fit a row: a table is read at
// a glance, and the whole text is in `spool show` and `spool ls --json`.
func brief(s string) string {
	first, _, more := strings.Cut(strings.TrimSpace(s), "\n")
	first = line(first)
	const max = 120
	if r := []rune(first); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	if more {
		return first + " …"
	}
	return first
}
