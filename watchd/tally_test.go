package watchd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

func ip(n int) *int       { return &n }
func sp(s string) *string { return &s }

// evs makes status events with the given seqs, texts "s<seq>".
func evs(seqs ...int64) []spool.Event {
	var out []spool.Event
	for _, s := range seqs {
		out = append(out, spool.Event{Seq: s, Type: spool.EventStatus, Text: fmt.Sprintf("s%d", s)})
	}
	return out
}

func rng(a, b int64) []spool.Event {
	var s []int64
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return evs(s...)
}

func doc(job string, updated float64, events []spool.Event) *spool.Progress {
	p := &spool.Progress{Job: job, Chat: "c", Updated: updated, State: spool.Running, Events: events}
	for _, e := range events {
		p.Seq = max(p.Seq, e.Seq)
	}
	return p
}

// written gives a document its exact stamp, as spool writes it.
func written(p *spool.Progress, at float64) *spool.Progress {
	p.Written = at
	return p
}

func done(p *spool.Progress, st spool.State, exit int) *spool.Progress {
	p.Done, p.State, p.Exit = true, st, ip(exit)
	return p
}

// said renders outputs as "kind:text" for comparison.
func said(outs []Output) string {
	var b []string
	for _, o := range outs {
		b = append(b, string(o.Kind)+":"+o.Text)
	}
	return strings.Join(b, " | ")
}

func TestTallyGuards(t *testing.T) {
	const began = 1000.0
	tests := []struct {
		name  string
		g     Guards
		docs  []*spool.Progress
		want  string
		ended bool
	}{
		{
			name: "stamp guard: a document stamped before the start is a previous run's",
			g:    Guards{Began: began},
			docs: []*spool.Progress{done(doc("old", 990, rng(1, 3)), spool.Done, 0)},
			want: "",
		},
		{
			name: "stamp guard allows the 10 ms rounding",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("new", began-0.01, evs(1))},
			want: "status:s1",
		},
		{
			name: "stamp guard: 20 ms before is stale",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("old", began-0.02, evs(1))},
			want: "",
		},
		{
			// A run's last document lands before its result: a watcher
			// that started after the result, within the rounding of
			// "updated", reads the exact stamp and leaves it.
			name: "exact stamp: the last document of a run that ended just before the start",
			g:    Guards{Began: began},
			docs: []*spool.Progress{written(done(doc("old", began, rng(1, 3)), spool.Done, 0), began-0.001)},
			want: "",
		},
		{
			name: "exact stamp: written at the start is this run's",
			g:    Guards{Began: began},
			docs: []*spool.Progress{written(doc("new", began-0.005, evs(1)), began)},
			want: "status:s1",
		},
		{
			name: "the older submitter's stale done document, then the new run",
			g:    Guards{Began: began},
			docs: []*spool.Progress{
				done(doc("old", 999, rng(1, 12)), spool.Done, 0),
				doc("new", 1001, evs(1, 2)),
				done(doc("new", 1002, evs(1, 2, 3)), spool.Done, 0),
			},
			want:  "status:s1 | status:s2 | status:s3 | end:done",
			ended: true,
		},
		{
			name: "job guard: a stale document of another job stamped after the start",
			g:    Guards{Began: began, Job: "j2"},
			docs: []*spool.Progress{done(doc("j1", 1005, rng(1, 5)), spool.Done, 0), doc("j2", 1006, evs(1))},
			want: "status:s1",
		},
		{
			name:  "job guard accepts its own job whatever the stamp: a run that ended before the watcher",
			g:     Guards{Began: began, Job: "j1"},
			docs:  []*spool.Progress{done(doc("j1", 900, rng(1, 2)), spool.Failed, 3)},
			want:  "status:s1 | status:s2 | end:failed (exit 3)",
			ended: true,
		},
		{
			name: "without a job id, a later run's document is not this watcher's",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("a", 1001, evs(1)), doc("b", 1002, rng(1, 4))},
			want: "status:s1",
		},
		{
			name: "each event once, in seq order, across replaces",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("j", 1001, evs(1, 2)), doc("j", 1002, evs(1, 2)), doc("j", 1003, evs(1, 2, 3, 4))},
			want: "status:s1 | status:s2 | status:s3 | status:s4",
		},
		{
			name: "events out of order in the list are said in seq order",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("j", 1001, evs(2, 1, 3))},
			want: "status:s1 | status:s2 | status:s3",
		},
		{
			name: "an older document after a newer one adds nothing",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("j", 1002, evs(1, 2, 3)), doc("j", 1001, evs(1, 2))},
			want: "status:s1 | status:s2 | status:s3",
		},
		{
			name: "a gap beyond the 64 kept is said as one line",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("j", 1001, evs(1)), doc("j", 1002, rng(10, 11))},
			want: "status:s1 | gap:(8 earlier events not shown) | status:s10 | status:s11",
		},
		{
			name: "a watcher joining late says what it missed",
			g:    Guards{Began: began},
			docs: []*spool.Progress{doc("j", 1001, rng(2, 3))},
			want: "gap:(1 earlier event not shown) | status:s2 | status:s3",
		},
		{
			name: "a seq beyond the list",
			g:    Guards{Began: began},
			docs: []*spool.Progress{func() *spool.Progress { p := doc("j", 1001, evs(1)); p.Seq = 4; return p }()},
			want: "status:s1 | gap:(3 earlier events not shown)",
		},
		{
			name: "a resuming subscriber gets nothing twice",
			g:    Guards{Began: began, Job: "j", Last: 2},
			docs: []*spool.Progress{doc("j", 900, rng(1, 4))},
			want: "status:s3 | status:s4",
		},
		{
			name: "a Python-era document with only a status",
			g:    Guards{Began: began},
			docs: []*spool.Progress{
				{Job: "p", Updated: 1001, Seq: 1, Status: "working"},
				{Job: "p", Updated: 1002, Seq: 2, Status: "still"},
				{Job: "p", Updated: 1003, Seq: 2, Status: "still", Done: true},
			},
			want:  "status:working | status:still | end:done",
			ended: true,
		},
		{
			name: "a writer with neither events nor seq: its status changes are the news",
			g:    Guards{Began: began},
			docs: []*spool.Progress{
				{Job: "p", Updated: 1001, Status: "one"},
				{Job: "p", Updated: 1002, Status: "one"},
				{Job: "p", Updated: 1003, Status: "two"},
			},
			want: "status:one | status:two",
		},
		{
			name: "done without a state, exit 1",
			g:    Guards{Began: began},
			docs: []*spool.Progress{{Job: "p", Updated: 1001, Done: true, Exit: ip(1), Events: []spool.Event{}}},
			want: "end:failed (exit 1)", ended: true,
		},
		{
			name: "nothing after the end",
			g:    Guards{Began: began},
			docs: []*spool.Progress{done(doc("j", 1001, evs(1)), spool.Cancelled, 143), doc("j", 1002, evs(1, 2))},
			want: "status:s1 | end:cancelled (exit 143)", ended: true,
		},
		{
			name: "a nil document (none there) is nothing",
			g:    Guards{Began: began},
			docs: []*spool.Progress{nil, doc("j", 1001, evs(1))},
			want: "status:s1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewTally(tt.g)
			var outs []Output
			for _, d := range tt.docs {
				outs = append(outs, f.Feed(d)...)
			}
			if got := said(outs); got != tt.want {
				t.Errorf("said\n  %s\nwant\n  %s", got, tt.want)
			}
			if f.Ended() != tt.ended {
				t.Errorf("ended = %v, want %v", f.Ended(), tt.ended)
			}
		})
	}
}

func TestTallyQuestionAnswerAndNotes(t *testing.T) {
	f := NewTally(Guards{Began: 1000})
	q := spool.Event{Seq: 3, Type: spool.EventQuestion, ID: "q1", Text: "Ship the fix?", Options: []string{"yes", "no"}}
	d1 := doc("j", 1001, []spool.Event{{Seq: 1, Type: spool.EventStart, Text: "attempt 1 on w1"}, {Seq: 2, Type: spool.EventGate, Text: "allowed"}, q})
	d1.Question = &spool.Question{ID: "q1", Text: q.Text, Options: q.Options}
	d1.State = spool.Waiting
	// The same question again in the next flush must not be asked twice.
	d2 := doc("j", 1002, []spool.Event{q, {Seq: 4, Type: spool.EventAnswer, ID: "q1", Text: "yes"}, {Seq: 5, Type: spool.EventWorker, Text: "lease renewed"}, {Seq: 6, Type: spool.EventEnd, Text: "exit 0"}})
	d2.Question = &spool.Question{ID: "q1", Text: q.Text, Options: q.Options}
	d2 = done(d2, spool.Done, 0)
	got := said(append(f.Feed(d1), f.Feed(d2)...))
	want := "note:started: attempt 1 on w1 | note:gate: allowed | question:Question: Ship the fix? [yes/no] | answer:answered: yes | note:worker: lease renewed | end:done"
	if got != want {
		t.Errorf("said\n  %s\nwant\n  %s", got, want)
	}
}

func TestTallyQuestionOnlyInDocument(t *testing.T) {
	// The question event scrolled out of the 64; the document's question is
	// still shown, once.
	f := NewTally(Guards{Began: 1000})
	d := doc("j", 1001, evs(1))
	d.Question = &spool.Question{ID: "q9", Text: "Proceed?"}
	got := said(append(f.Feed(d), f.Feed(d)...))
	if want := "status:s1 | question:Question: Proceed?"; got != want {
		t.Errorf("said %s, want %s", got, want)
	}
}

func TestTallyResumeSkipsShownQuestion(t *testing.T) {
	f := NewTally(Guards{Began: 1000, Job: "j", Last: 3})
	d := doc("j", 1001, []spool.Event{{Seq: 3, Type: spool.EventQuestion, ID: "q1", Text: "Go?"}})
	d.Question = &spool.Question{ID: "q1", Text: "Go?"}
	if got := said(f.Feed(d)); got != "" {
		t.Errorf("resumed after the question, said %q", got)
	}
}

// A consumer that takes a few outputs at a time (a stream's bounded write)
// gets the rest by feeding again, nothing twice; once it is so far behind
// that the events it missed left the document, it is told with one gap
// and goes on from the newest.
func TestTallyFeedFuncStopsShort(t *testing.T) {
	f := NewTally(Guards{Job: "j"})
	take := func(d *spool.Progress, n int) (string, bool) {
		var out []Output
		complete := f.FeedFunc(d, func(o Output) bool {
			if len(out) == n {
				return false
			}
			out = append(out, o)
			return true
		})
		return said(out), complete
	}
	d1 := doc("j", 1, rng(1, 5))
	d1.Question = &spool.Question{ID: "q1", Text: "ok?"}
	for _, c := range []struct {
		d        *spool.Progress
		n        int
		want     string
		complete bool
	}{
		{d1, 2, "status:s1 | status:s2", false},
		{d1, 2, "status:s3 | status:s4", false},
		{d1, 2, "status:s5 | question:Question: ok?", true},
		{d1, 2, "", true},
		{doc("j", 2, rng(10, 12)), 1, "gap:(4 earlier events not shown)", false},
		{done(doc("j", 3, rng(10, 14)), spool.Done, 0), 2, "status:s10 | status:s11", false},
		{done(doc("j", 3, rng(10, 14)), spool.Done, 0), 9, "status:s12 | status:s13 | status:s14 | end:done", true},
	} {
		got, complete := take(c.d, c.n)
		if got != c.want || complete != c.complete {
			t.Fatalf("took %q (complete %v); want %q (%v)", got, complete, c.want, c.complete)
		}
	}
	if !f.Ended() {
		t.Error("not ended after the end")
	}
}

// The question ids a tally remembers are bounded: a run that asks
// without end costs no more than one that asks a few times.
func TestTallyAskedBounded(t *testing.T) {
	f := NewTally(Guards{Job: "j"})
	for i := int64(1); i <= 10*maxAsked; i++ {
		ev := spool.Event{Seq: i, Type: spool.EventQuestion, ID: fmt.Sprintf("q%d", i), Text: "?"}
		d := doc("j", 1, []spool.Event{ev})
		d.Question = &spool.Question{ID: ev.ID, Text: "?"}
		if got := said(f.Feed(d)); got != "question:Question: ?" {
			t.Fatalf("question %d: %q", i, got)
		}
	}
	if len(f.asked) > maxAsked || len(f.askedOrder) > maxAsked {
		t.Errorf("%d ids remembered; want at most %d", len(f.asked), maxAsked)
	}
}

func TestEndLine(t *testing.T) {
	tests := []struct {
		st   spool.State
		exit *int
		err  *string
		want string
	}{
		{spool.Done, ip(0), nil, "done"},
		{spool.Done, nil, nil, "done"},
		{spool.Failed, ip(2), sp("boom"), "failed (exit 2): boom"},
		{spool.Failed, nil, sp("gate: git commit refused"), "failed: gate: git commit refused"},
		{spool.Cancelled, nil, nil, "cancelled"},
	}
	for _, tt := range tests {
		if got := EndLine(tt.st, tt.exit, tt.err); got != tt.want {
			t.Errorf("EndLine(%s) = %q, want %q", tt.st, got, tt.want)
		}
	}
}
