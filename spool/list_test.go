package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	s := testSpool(t)
	q, _ := s.Submit(argvSpec("q", "x"))
	r, _ := s.Submit(argvSpec("r", "x"))
	s.Claim(r, Lease{Worker: "w1", Host: "h", PID: 1, Chat: "r"})
	d, _ := s.Submit(argvSpec("d", "x"))
	l, _, _ := s.Claim(d, Lease{Worker: "w2", Host: "h", PID: 1, Chat: "d"})
	zero := 0
	s.End(Ending{Result: &Result{Job: d, Chat: "d", State: Done, Exit: &zero, Attempt: l.Attempt}, Lease: l})
	retry, _ := s.Submit(&Spec{Chat: "retry", Argv: []string{"x"}, Attempts: 2})
	l, _, _ = s.Claim(retry, Lease{Worker: "w3", Host: "h", PID: 1})
	s.Requeue(l, time.Now().Add(time.Minute))
	writeRaw(t, s, "bad.json", "{")
	writeRaw(t, s, "bad.ready", "")
	writeRaw(t, s, "hand.json", `{"chat":"h","argv":["x"]}`)
	// Two final documents: done wins, whichever the listing meets first.
	writeRaw(t, s, "two.json", `{"chat":"t","argv":["x"]}`)
	writeRaw(t, s, "two.failed", `{"job":"two","chat":"wrong","state":"failed","attempt":1}`)
	writeRaw(t, s, "two.done", `{"job":"two","chat":"t","state":"done","attempt":2}`)

	// A symlink in a result's place is refused, in the row.
	writeRaw(t, s, "link.json", `{"chat":"l","argv":["x"]}`)
	os.Symlink(s.Path("two.done"), s.Path("link.done"))
	for _, n := range []string{"a", "b", "c"} {
		s.Submit(&Spec{ID: "x" + n, Chat: "x", Argv: []string{"x"}})
	}

	rows, err := s.List(ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Row{}
	for _, row := range rows {
		got[row.Job] = row
	}
	if len(rows) != 11 || rows[0].Job > rows[1].Job {
		t.Fatalf("rows: %+v", rows)
	}
	for _, c := range []struct {
		job   string
		st    State
		chat  string
		att   int
		retry bool
	}{
		{q, Queued, "q", 1, false},
		{r, Running, "r", 1, false},
		{d, Done, "d", 1, false},
		{retry, Queued, "retry", 2, true},
		{"hand", New, "h", 0, false},
		{"two", Done, "t", 2, false},
	} {
		row := got[c.job]
		if row.State != c.st || row.Chat != c.chat || row.Attempt != c.att || (row.NotBefore != 0) != c.retry || row.Created == 0 || row.Problem != "" {
			t.Errorf("%s: %+v", c.job, row)
		}
	}
	if row := got["link"]; row.State != Done || !strings.Contains(row.Problem, "not a regular file") || row.Chat != "" {
		t.Errorf("symlinked result's row: %+v", row)
	}
	if row := got["bad"]; row.State != Queued || !strings.Contains(row.Problem, "does not parse") {
		t.Errorf("bad spec's row: %+v", row)
	}
	if row := got[d]; row.Exit == nil || *row.Exit != 0 || row.Worker != "" && row.Worker != "w2" {
		t.Errorf("done row: %+v", row)
	}
	only, _ := s.List(ListOptions{State: Running})
	if len(only) != 1 || only[0].Job != r {
		t.Errorf("--state running: %+v", only)
	}
}

// buildSpool writes a spool of n jobs quickly (no fsync: a fixture, not a
// test of durability): mostly ended, a few queued, running and failed.
func buildSpool(tb testing.TB, dir string, n int) {
	tb.Helper()
	t0 := time.Now().Add(-48 * time.Hour)
	for i := 0; i < n; i++ {
		id := NewJobID(t0.Add(time.Duration(i) * time.Millisecond))
		chat := fmt.Sprintf("chat%d", i%500)
		spec := fmt.Sprintf(`{"id":%q,"chat":%q,"created":%f,"argv":["make","job%d"]}`+"\n", id, chat, Stamp(t0), i)
		files := map[string]string{id + ExtSpec: spec, id + ExtEvents: `{"seq":1,"type":"status","text":"hi"}` + "\n"}
		switch {
		case i%100 == 1:
			files[id+ExtReady] = ""
		case i%100 == 2:
			files[id+ExtRunning] = fmt.Sprintf(`{"job":%q,"chat":%q,"worker":"w","host":"h","pid":1,"attempt":1,"lease_s":30}`, id, chat)
		case i%100 == 3:
			files[id+ExtFailed] = fmt.Sprintf(`{"job":%q,"chat":%q,"state":"failed","exit":1,"error":"exit 1","attempt":1}`, id, chat)
		default:
			files[id+ExtDone] = fmt.Sprintf(`{"job":%q,"chat":%q,"state":"done","exit":0,"error":null,"started":%f,"finished":%f,"attempt":1}`, id, chat, Stamp(t0), Stamp(t0))
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), FileMode); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// BenchmarkList is the cost of `spool ls`'s reading on a spool of 100,000
// jobs (the table's printing is in cmd/spool's BenchmarkLs).
func BenchmarkList(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "spool")
	s, err := Create(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	buildSpool(b, dir, 100_000)
	// Let the fixture reach the disk, so that its writeback does not run
	// under the measurement.
	syscall.Sync()
	b.Run("100k", func(b *testing.B) {
		for b.Loop() {
			rows, err := s.List(ListOptions{})
			if err != nil || len(rows) != 100_000 {
				b.Fatal(len(rows), err)
			}
		}
	})
	b.Run("100k-scan-only", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Scan(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSubmit is the real, durable Submit: spec and marker fsync'd,
// and the directory after each.
func BenchmarkSubmit(b *testing.B) {
	s := testSpool(b)
	sp := Spec{Chat: "c", Argv: []string{"make", "backup"}}
	for b.Loop() {
		x := sp
		if _, err := s.Submit(&x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvent appends to a job's events of up to 1,000 lines. An
// append counts the file's lines (the seq is the line number), so its cost
// grows with the file: see the 10k case.
func BenchmarkAppendEvent(b *testing.B) {
	for _, per := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("%d-lines", per), func(b *testing.B) {
			s := testSpool(b)
			i := 0
			for b.Loop() {
				if _, err := s.AppendEvent(fmt.Sprintf("j%d", i/per), Event{Text: "a status line of ordinary length"}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSubmitBatch is `spool submit --batch` of 10,000 jobs through the
// package: every spec and marker durable when it returns (two syncfs).
func BenchmarkSubmitBatch(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := testSpool(b)
		specs := make([]*Spec, n)
		for j := range specs {
			specs[j] = &Spec{Chat: "c" + strconv.Itoa(j%64), Argv: []string{"true"}}
		}
		b.StartTimer()
		ids, err := s.SubmitBatch(specs)
		if err != nil || len(ids) != n {
			b.Fatal(err, len(ids))
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
