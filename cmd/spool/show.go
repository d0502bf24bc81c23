package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var showCmd = cli.Command{
	Name:  "show",
	Usage: "JOB [--json]",
	Short: "Show a job's state, files, spec, lease or result, events and progress.",
	Long: `The lease is a running job's, the result an ended one's; the events are
its last 10, read from the events file's last MiB at most, after a line
that says what was left out (past that MiB the older lines are not
counted, and the seqs are printed as -); the progress is its chat's. Text
of the tree is printed with its control characters escaped (\x1b). Exits
1 if there is no such job, 2 for an invalid id.`,
	Flags: func(fs *flag.FlagSet) { fs.Bool("json", false, "print one JSON document") },
	Run:   show,
}

// showEvents is how many of the last events show prints.
const showEvents = 10

// jobView is what show prints, and its --json document. Events are the
// last of the file: OlderEvents counts the lines before them when the
// whole file was read, UnreadBytes the start of a file longer than
// show reads (spool.LastEvents), whose lines are not counted: the seqs
// of Events are then 0.
type jobView struct {
	Job         string          `json:"job"`
	State       spool.State     `json:"state"`
	Files       []string        `json:"files"`
	Spec        *spool.Spec     `json:"spec,omitempty"`
	Marker      *markerView     `json:"marker,omitempty"`
	Lease       *spool.Lease    `json:"lease,omitempty"`
	Heartbeat   float64         `json:"heartbeat,omitempty"`
	Result      *spool.Result   `json:"result,omitempty"`
	Cancel      bool            `json:"cancel_requested,omitempty"`
	Events      []spool.Event   `json:"events"`
	OlderEvents int64           `json:"older_events,omitempty"`
	UnreadBytes int64           `json:"events_unread_bytes,omitempty"`
	Progress    *spool.Progress `json:"progress,omitempty"`
	Problems    []string        `json:"problems,omitempty"`
}

type markerView struct {
	NotBefore float64 `json:"not_before"`
	Attempt   int     `json:"attempt"`
}

func show(c *cli.Call) error {
	s, job, err := withJob(c)
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := view(s, job)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	printView(c.Stdout, v, time.Now())
	return nil
}

func view(s *spool.Spool, job string) (*jobView, error) {
	f, err := s.JobFiles(job)
	if err != nil {
		return nil, err
	}
	st, ok := f.State()
	if !ok {
		return nil, cli.Failf(cli.ExitFail, "job %s: no such job in %s", job, s.RootPath)
	}
	v := &jobView{Job: job, State: st, Events: []spool.Event{}}
	for _, ext := range []string{spool.ExtSpec, spool.ExtReady, spool.ExtRunning, spool.ExtDone, spool.ExtFailed,
		spool.ExtCancelled, spool.ExtCancel, spool.ExtEvents, spool.ExtLog} {
		if _, err := s.Stat(job + ext); err == nil {
			v.Files = append(v.Files, job+ext)
		}
	}
	problem := func(err error) { v.Problems = append(v.Problems, line(err.Error())) }
	if f&spool.HasSpec != 0 {
		if v.Spec, err = s.ReadSpec(job); err != nil {
			problem(err)
		}
	}
	v.Cancel = f&spool.HasCancel != 0
	chat := ""
	if v.Spec != nil {
		chat = v.Spec.Chat
	}
	switch {
	case st.Final():
		if v.Result, err = s.ReadResult(job, st); err != nil {
			problem(err)
		} else if chat == "" {
			chat = v.Result.Chat
		}
	case st == spool.Running:
		l, fi, err := s.ReadLease(job)
		if err != nil {
			problem(err)
		} else {
			v.Lease = l
			v.Heartbeat = spool.Stamp(fi.ModTime())
			if chat == "" {
				chat = l.Chat
			}
		}
	case st == spool.Queued:
		if m, err := s.ReadMarker(job); err != nil {
			problem(err)
		} else {
			v.Marker = &markerView{NotBefore: spool.Stamp(m.NotBefore), Attempt: m.Attempt}
		}
	}
	if f&spool.HasEvents != 0 {
		// The latest showEvents only, from the file's last MiB at most,
		// whatever its size: reading 200 MB of empty lines took a minute.
		t, err := s.LastEvents(job, showEvents)
		if err != nil {
			problem(err)
		} else {
			v.Events = append(v.Events, t.Events...)
			v.OlderEvents, v.UnreadBytes = t.Older, t.Unread
		}
	}
	if chat != "" {
		p, err := s.ReadProgress(chat)
		switch {
		case err == nil:
			v.Progress = p
		case !errors.Is(err, fs.ErrNotExist):
			problem(err)
		}
	}
	return v, nil
}

// printView prints v for a person, one "key: value" a line. Every value
// passes through spool.Printable: a spec, a lease, a result, an event and
// a progress document are anyone's who can write the spool, and a status
// of "done\x1b]52;c;...\a" printed raw would set the operator's clipboard.
func printView(w io.Writer, v *jobView, now time.Time) {
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-10s %s\n", k+":", spool.Printable(fmt.Sprintf(format, args...)))
	}
	ago := func(t float64) string { return age(now.Sub(spool.TimeOf(t))) + " ago" }
	kv("job", "%s", v.Job)
	kv("state", "%s", v.State)
	kv("files", "%s", strings.Join(v.Files, " "))
	if sp := v.Spec; sp != nil {
		kv("chat", "%s", sp.Chat)
		kv("created", "%s (%s)", spool.TimeOf(sp.Created).Format(time.RFC3339), ago(sp.Created))
		if sp.Script != nil {
			// A script of several lines keeps them, each indented under
			// the key: on one line, two commands read as one.
			if lines := strings.Split(strings.TrimRight(*sp.Script, "\n"), "\n"); len(lines) > 1 {
				kv("script", "(%d lines)", len(lines))
				for _, l := range lines {
					fmt.Fprintf(w, "  %s\n", spool.Printable(l))
				}
			} else {
				kv("script", "%s", line(*sp.Script))
			}
		} else {
			b, _ := json.Marshal(sp.Argv)
			kv("argv", "%s", b)
		}
		if sp.Cwd != "" {
			kv("cwd", "%s", sp.Cwd)
		}
		if len(sp.Env) > 0 {
			b, _ := json.Marshal(sp.Env)
			kv("env", "%s", b)
		}
		if sp.Timeout != 0 {
			kv("timeout", "%s", time.Duration(sp.Timeout))
		}
		kv("attempts", "%d", sp.MaxTries())
	}
	if m := v.Marker; m != nil {
		nb := spool.TimeOf(m.NotBefore)
		if nb.After(now) {
			kv("queued", "attempt %d, retry in %s", m.Attempt, age(nb.Sub(now)+time.Second/2))
		} else {
			kv("queued", "attempt %d, since %s", m.Attempt, ago(m.NotBefore))
		}
	}
	if l := v.Lease; l != nil {
		kv("lease", "worker %s on %s pid %d, attempt %d, claimed %s, heartbeat %s (lease %gs)",
			l.Worker, l.Host, l.PID, l.Attempt, ago(l.Claimed), ago(v.Heartbeat), l.LeaseS)
	}
	if r := v.Result; r != nil {
		s := fmt.Sprintf("%s, attempt %d", r.State, r.Attempt)
		if r.Exit != nil {
			s += fmt.Sprintf(", exit %d", *r.Exit)
		}
		if r.Error != nil {
			s += ", error: " + line(*r.Error)
		}
		if r.Finished != 0 {
			s += ", finished " + ago(r.Finished)
		}
		kv("result", "%s", s)
		for _, l := range r.Limits {
			kv("limit", "%s", l)
		}
	}
	if v.Cancel {
		kv("cancel", "requested")
	}
	for _, p := range v.Problems {
		kv("problem", "%s", p)
	}
	printEvents(w, v)
	if p := v.Progress; p != nil {
		if p.Job != v.Job {
			// The chat moved on: its document is another run's, whose
			// status is not this job's and must not read as its end.
			kv("chat now", "job %s's run, %s, updated %s (not this job: spool show %s)", p.Job, p.State, ago(p.Updated), p.Job)
			return
		}
		kv("progress", "job %s, %s, seq %d, updated %s", p.Job, p.State, p.Seq, ago(p.Updated))
		if p.Status != "" {
			kv("status", "%s", line(p.Status))
		}
		if q := p.Question; q != nil {
			kv("question", "%s %s %v", q.ID, line(q.Text), q.Options)
		}
	}
}

// printEvents prints the last events, after a line that says what came
// before them: how many lines, or, when show did not read the file's
// start, how much of it (the seqs are then not known, and printed as -).
func printEvents(w io.Writer, v *jobView) {
	if len(v.Events) == 0 && v.OlderEvents == 0 && v.UnreadBytes == 0 {
		return
	}
	fmt.Fprintf(w, "events (last %d):\n", len(v.Events))
	switch {
	case v.UnreadBytes > 0:
		fmt.Fprintf(w, "  (older events not shown: the file's first %s were not read)\n", spool.FormatSize(v.UnreadBytes))
	case v.OlderEvents == 1:
		fmt.Fprintf(w, "  (1 older event not shown)\n")
	case v.OlderEvents > 1:
		fmt.Fprintf(w, "  (%d older events not shown)\n", v.OlderEvents)
	}
	for _, ev := range v.Events {
		seq := "-"
		if ev.Seq > 0 {
			seq = strconv.FormatInt(ev.Seq, 10)
		}
		fmt.Fprintf(w, "  %4s  %-8s  %s\n", seq, line(ev.Type), line(ev.Text))
	}
}
