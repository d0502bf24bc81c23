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
retry's wait, why a queued job waits, the exit or error of an ended job,
a document that cannot be read). A queued job waits for its chat's
running run (or its question's answer), for an older job of its chat,
or for a free worker. --json prints one JSON object a line.`,
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
	all := rows
	if st == spool.New || st == spool.Queued {
		// Why a job waits is read off the others: the chat's running one.
		if all, err = s.List(spool.ListOptions{Now: now}); err != nil {
			return err
		}
	}
	writeTable(w, rows, now, waits(s, all))
	return nil
}

// waits says, for each new or queued job of rows that is not waiting out a
// retry's backoff, why it waits: its chat's run is running (or waiting
// for an answer), an older job of its chat comes first, or no worker is
// free (none is, or no spoold runs). A chat runs one job at a time, oldest
// first; the workers are how many chats run at once.
func waits(s *spool.Spool, rows []spool.Row) map[string]string {
	running := map[string]string{} // chat: its running job
	first := map[string]string{}   // chat: its oldest waiting job
	asking := map[string]bool{}    // chat: its run waits for an answer
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Chat == "":
		case r.State == spool.Running:
			running[r.Chat] = r.Job
		case (r.State == spool.New || r.State == spool.Queued) && first[r.Chat] == "":
			first[r.Chat] = r.Job // rows are sorted by id: oldest first
		}
	}
	for chat := range running {
		if doc, err := s.ReadProgress(chat); err == nil && doc.Job == running[chat] && doc.Question != nil {
			asking[chat] = true
		}
	}
	why := map[string]string{}
	for i := range rows {
		r := &rows[i]
		if (r.State != spool.New && r.State != spool.Queued) || r.NotBefore != 0 || r.Problem != "" || r.Chat == "" {
			continue
		}
		switch j := running[r.Chat]; {
		case j != "" && asking[r.Chat]:
			why[r.Job] = "waits: its chat's run " + j + " waits for an answer (spool show " + j + ")"
		case j != "":
			why[r.Job] = "waits: its chat's run " + j + " is running"
		case first[r.Chat] != r.Job:
			why[r.Job] = "waits: " + first[r.Chat] + " of its chat runs first"
		default:
			why[r.Job] = "waits for a free worker (all busy, or no spoold runs)"
		}
	}
	return why
}

// writeTable prints rows as aligned columns, sized by one pass over them.
func writeTable(w *bufio.Writer, rows []spool.Row, now time.Time, why map[string]string) {
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
		if wh := why[r.Job]; wh != "" && notes[i] == "" {
			notes[i] = wh
		}
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
