package tests

// One runaway job must not take the spool down for every chat: a job that
// prints without end and one that appends events without end run beside
// other chats' jobs, and a disk filled from outside past the free-space
// floor stops the claims and the submits until space returns.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

func TestLimitsRunaway(t *testing.T) {
	dir := newSpool(t)
	const logLimit = 1 << 20
	prom := filepath.Join(t.TempDir(), "spoold.prom")
	p := spooldStart(t, dir, "--workers", "4", "--max-log", "1MiB", "--max-events", "2MiB", "--max-event-rate", "20",
		"--metrics-file", prom, "--metrics-every", "200ms")
	// A job that prints without end (held to its log limit until its
	// timeout), one that appends events without end (ended at its events
	// limit), and two ordinary jobs of other chats beside them.
	printer := spooldSubmit(t, dir, "--chat", "printer", "--timeout", "6s", "--", "sh", "-c", `echo "the first line"; exec yes "runaway output"`)
	flood := spooldSubmit(t, dir, "--chat", "flood", "--timeout", "60s", "--", "sh", "-c", `spool say "about to flood"; exec yes '{"type":"status","text":"flood"}' >> "$SPOOL_EVENTS"`)
	var others []string
	for _, c := range []string{"ok1", "ok2"} {
		others = append(others, spooldSubmit(t, dir, "--chat", c, "--", "sh", "-c", `spool say hello; sleep 1; spool say bye`))
	}
	// A watcher of the runaway chat is told of what it was not shown.
	follow := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "flood", "--job", flood, "--timeout", "60s")
	follow.Env = raceEnv()
	var fout bytes.Buffer
	follow.Stdout, follow.Stderr = &fout, &fout
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	s := openSpool(t, dir, 200)
	// While the printer runs, its log stays near its limit: cut back to
	// its first half whenever it passes it (measured every 50 ms, so a
	// writer at disk speed overshoots by what it writes in that time).
	var largest int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if st, _ := s.State(printer); st.Final() {
			break
		}
		if fi, err := os.Stat(filepath.Join(dir, printer+".log")); err == nil {
			largest = max(largest, fi.Size())
		}
		time.Sleep(5 * time.Millisecond) // the pace of the samples
	}
	t.Logf("the printer's log: at most %d bytes seen (limit %d)", largest, logLimit)
	if largest > 256<<20 {
		t.Errorf("the printer's log reached %d bytes; its limit is %d", largest, logLimit)
	}
	for _, j := range others {
		if r := waitEnd(t, s, j, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("another chat's job %s ended %s: %v", j, r.State, relStr(r.Error))
		}
	}
	r := waitEnd(t, s, printer, 30*time.Second, 20*time.Millisecond)
	if r.State != spool.Failed || !strings.Contains(relStr(r.Error), "timed out") || len(r.Limits) == 0 || !strings.HasPrefix(r.Limits[0], "log: cut") {
		t.Errorf("the printer ended %s: %s, limits %q", r.State, relStr(r.Error), r.Limits)
	}
	log, _ := os.ReadFile(filepath.Join(dir, printer+".log"))
	mark := []byte("[spoold: this log passed its limit of 1.0 MiB")
	cut := bytes.LastIndex(log, mark)
	if !bytes.HasPrefix(log, []byte("the first line\n")) || cut < 0 || !bytes.Contains(log[cut:], []byte("\nrunaway output\nrunaway output\n")) {
		t.Errorf("the cut log does not keep its head, mark the cut, and end with the newest output (%d bytes)", len(log))
	}
	if int64(len(log)) > 256<<20 {
		t.Errorf("the printer's log ended at %d bytes", len(log))
	}
	r = waitEnd(t, s, flood, 30*time.Second, 20*time.Millisecond)
	if r.State != spool.Failed || !strings.Contains(relStr(r.Error), "events passed their limit of 2.0 MiB") {
		t.Errorf("the flood ended %s: %s", r.State, relStr(r.Error))
	}
	fi, _ := os.Stat(filepath.Join(dir, flood+".events"))
	t.Logf("the flood's events: %d bytes when it was ended (limit %d)", fi.Size(), 2<<20)
	if fi.Size() > 256<<20 {
		t.Errorf("the flood's events reached %d bytes", fi.Size())
	}
	if err := follow.Wait(); exitCode(err) != 1 || !strings.Contains(fout.String(), "events dropped: more than 20 a second") {
		t.Errorf("the flood's watcher: exit %d, said:\n%.2000s", exitCode(err), fout.String())
	}
	// An operator sees it: spool ls, spool show, the metrics.
	ls, _ := command(raceEnv(), "spool", "--spool", dir, "ls").CombinedOutput()
	for _, want := range []string{"limit: log", "limit: event rate, events"} {
		if !strings.Contains(string(ls), want) {
			t.Errorf("spool ls does not say %q:\n%s", want, ls)
		}
	}
	show, _ := command(raceEnv(), "spool", "--spool", dir, "show", printer).CombinedOutput()
	if !regexp.MustCompile(`limit:\s+log: cut \d+ times`).Match(show) {
		t.Errorf("spool show of the printer:\n%s", show)
	}
	eventually(t, 10*time.Second, 50*time.Millisecond, "the limit hits in the metrics", func() bool {
		b, _ := os.ReadFile(prom)
		return !bytes.Contains(b, []byte(`vmspool_spoold_limit_hits_total{limit="log"} 0`)) &&
			!bytes.Contains(b, []byte(`vmspool_spoold_limit_hits_total{limit="events"} 0`)) &&
			bytes.Contains(b, []byte("vmspool_spoold_spool_free_bytes"))
	})
	if n := strings.Count(p.logText(), "log passed its limit"); n != 1 {
		t.Errorf("the log cut was logged %d times; want once", n)
	}
}

// TestLimitsFloor: a small filesystem filled from outside past the floor.
// Claims stop (said once), submits refuse with the reason, nothing is
// lost; freeing space resumes the queue by itself.
func TestLimitsFloor(t *testing.T) {
	mnt := diskSmall(t)
	dir := filepath.Join(mnt, "spool")
	floorEnv := append(raceEnv(), "SPOOL_MIN_FREE=1MiB", "SPOOL_MIN_FREE_PERCENT=0", "SPOOL_MIN_FREE_INODES=0")
	prom := filepath.Join(t.TempDir(), "spoold.prom")
	p := relStart(t, "spoold", "--spool", dir, "--rescan", "1s", "--min-free", "1MiB", "--min-free-percent", "0", "--min-free-inodes", "0",
		"--metrics-file", prom, "--metrics-every", "200ms")
	s := openSpool(t, dir, 300)
	submit := func(args ...string) (string, string, error) {
		cmd := command(floorEnv, "spool", append([]string{"--spool", dir, "submit"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), stderr.String(), err
	}
	first, _, err := submit("--chat", "a", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	if r := waitEnd(t, s, first, 20*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Fatalf("first job: %s", r.State)
	}
	// Fill from outside until half a MiB is left: below the floor, not full.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	if err := os.WriteFile(fill, make([]byte, int64(st.Bavail)*int64(st.Bsize)-512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := submit("--chat", "b", "--", "true")
	if exitCode(err) != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "below the free-space floor") {
		t.Errorf("spool submit below the floor: exit %d, said %q", exitCode(err), stderr)
	}
	// A job queued by hand (which no floor can stop) waits, queued, once
	// spoold has seen the floor (it looks every half second).
	eventually(t, 10*time.Second, 20*time.Millisecond, "spoold to say it is below the floor", func() bool {
		return strings.Contains(p.logText(), "below the free-space floor")
	})
	spooldHandSubmit(t, dir, "by-hand", "c", `{"chat":"c","argv":["true"]}`)
	time.Sleep(2 * time.Second) // the point: a window in which it must not be claimed
	if st, _ := s.State("by-hand"); st != spool.Queued {
		t.Errorf("below the floor, the hand-queued job is %s; want queued", st)
	}
	eventually(t, 10*time.Second, 50*time.Millisecond, "below_floor 1 in the metrics", func() bool {
		b, _ := os.ReadFile(prom)
		return bytes.Contains(b, []byte("vmspool_spoold_below_floor 1"))
	})
	// Space returns: the queue resumes by itself, and submits work.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if r := waitEnd(t, s, "by-hand", 20*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("once space returned, the hand-queued job ended %s", r.State)
	}
	after, _, err := submit("--chat", "d", "--", "true")
	if err != nil {
		t.Fatalf("spool submit once space returned: %v", err)
	}
	if r := waitEnd(t, s, after, 20*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("a job submitted once space returned ended %s", r.State)
	}
	log := p.logText()
	if n := strings.Count(log, "claiming no new job until space is freed"); n != 1 {
		t.Errorf("the floor was logged %d times; want once:\n%s", n, log)
	}
	if !strings.Contains(log, "free space above the floor again") {
		t.Errorf("spoold did not say the floor was passed again:\n%s", log)
	}
	p.stop(t, 20*time.Second)
}
