package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// spoolcliRun runs the real spool binary with env added to a clean
// environment, and returns its exit code, stdout and stderr.
func spoolcliRun(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin("spool"), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("spool %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// spoolcliTree lists every name under dir with its size, sorted, so that
// "the tree is unchanged" is one comparison.
func spoolcliTree(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, _ := os.Lstat(p)
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, rel+" "+fi.Mode().String())
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func spoolcliOneLine(t testing.TB, what, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(stderr, "spool") {
		t.Errorf("%s: stderr is not one line: %q", what, stderr)
	}
}

// Bad input: one line on stderr, exit 2, and the tree as it was. What a
// submit refuses in a spec (ids, what runs, env, timeout, attempts,
// size, the floor, a taken id, links in the way) is the writers'
// contract, testdata/contract/submit.json (TestContract); here are the
// command's own: its flags, the files it reads, the other commands.
func TestSpoolBadInput(t *testing.T) {
	dir := newSpool(t)
	os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
	os.WriteFile(filepath.Join(dir, "progress", "c"), []byte(`{"job":"old"}`), 0o640)
	work := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(work, name)
		os.WriteFile(p, []byte(content), 0o640)
		return p
	}
	env := []string{"SPOOL_DIR=" + dir}
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"empty script", []string{"submit", "--chat", "c", "--script", write("empty.sh", " \n")}},
		{"missing script", []string{"submit", "--chat", "c", "--script", filepath.Join(work, "nope.sh")}},
		{"spec that does not parse", []string{"submit", "--spec", write("bad.json", `{"chat":`)}},
		{"bad env", []string{"submit", "--chat", "c", "--env", "NOEQUALS", "--", "true"}},
		{"unknown flag", []string{"submit", "--chat", "c", "--frobnicate", "--", "true"}},
		{"show of a bad id", []string{"show", "../x"}},
		{"show of an empty id", []string{"show", ""}},
		{"cancel of an empty id", []string{"cancel", ""}},
		{"show of an id of 200 characters", []string{"show", long}},
		{"cancel of a bad id", []string{"cancel", ".x"}},
		{"requeue of a bad id", []string{"requeue", long}},
		{"answer for a bad chat", []string{"answer", "--chat", "../c", "yes"}},
		{"ls of a bad state", []string{"ls", "--state", "sleeping"}},
		{"unknown command", []string{"frob"}},
		{"say outside a job", []string{"say", "hello"}},
		{"ask outside a job", []string{"ask", "ok?"}},
	} {
		before := spoolcliTree(t, dir)
		code, out, errs := spoolcliRun(t, env, tc.args...)
		if code != 2 || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing", tc.name, code, out)
		}
		spoolcliOneLine(t, tc.name, errs)
		if after := spoolcliTree(t, dir); after != before {
			t.Errorf("%s: the tree changed:\n%s\n->\n%s", tc.name, before, after)
		}
	}
}

// A read-only spool: exit 2, and nothing left behind (no temporary, no
// spec without its marker).
func TestSpoolSubmitReadOnly(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "spool")
	os.Mkdir(dir, 0o755)
	exe := bin("spool")
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// root writes through any mode: run the submit as nobody, from a
		// copy of the binary nobody may execute.
		own := filepath.Join(base, "bin")
		os.Mkdir(own, 0o755)
		exe = filepath.Join(own, "spool")
		b, err := os.ReadFile(bin("spool"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(exe, b, 0o755)
		// Open the test's own directories to nobody, and nothing above
		// the temporary directory; if that is closed, skip.
		tmp := filepath.Clean(os.TempDir())
		for p := base; strings.HasPrefix(p, tmp+"/"); p = filepath.Dir(p) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				os.Chmod(p, fi.Mode().Perm()|0o005)
			}
		}
		for p := tmp; ; p = filepath.Dir(p) {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
				t.Skipf("%s is closed to other users: cannot run the submit as nobody", p)
			}
			if p == "/" {
				break
			}
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	before := spoolcliTree(t, dir)
	cmd := exec.Command(exe, "--spool", dir, "submit", "--chat", "c", "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("submit into a read-only spool: %v, stderr %q; want exit 2", err, errb.String())
	}
	spoolcliOneLine(t, "read-only", errb.String())
	// It names the spool and what to do, not only "permission denied".
	if e := errb.String(); !strings.Contains(e, "spool "+dir+": cannot write it") || !strings.Contains(e, "lets only its owner") {
		t.Errorf("submit into a read-only spool says %q: want the spool named and what to do", e)
	}
	if after := spoolcliTree(t, dir); after != before {
		t.Errorf("the tree changed:\n%s\n->\n%s", before, after)
	}
}

// The hand submission of docs/contract.md, run as written with sh, gives the same
// tree as `spool submit`.
func TestSpoolHandSubmission(t *testing.T) {
	const snippet = `cd "$SPOOL_DIR" && id=$(date +%Y%m%dT%H%M%S)-$$
printf '{"chat":"nightly","argv":["make","backup"]}' > .$id.json && mv .$id.json $id.json
rm -f progress/nightly chats/nightly/answer.json
: > .$id.ready && mv .$id.ready $id.ready
`
	prepare := func() string {
		dir := newSpool(t)
		os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
		os.MkdirAll(filepath.Join(dir, "chats", "nightly"), 0o750)
		os.WriteFile(filepath.Join(dir, "progress", "nightly"), []byte("{}"), 0o640)
		os.WriteFile(filepath.Join(dir, "chats", "nightly", "answer.json"), []byte("{}"), 0o640)
		return dir
	}
	hand, tool := prepare(), prepare()
	sh := exec.Command("sh", "-c", snippet)
	sh.Env = append(os.Environ(), "SPOOL_DIR="+hand)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the snippet: %v %s", err, out)
	}
	code, out, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + tool}, "submit", "--chat", "nightly", "--", "make", "backup")
	if code != 0 {
		t.Fatal(errs)
	}
	toolID := strings.TrimSpace(out)
	shape := func(dir string) (string, string) {
		var names []string
		id := ""
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(dir, p)
			if job, ext, ok := spool.SplitName(rel); ok {
				id = job
				rel = "JOB" + ext
			}
			names = append(names, rel)
			return nil
		})
		sort.Strings(names)
		return id, strings.Join(names, " ")
	}
	handID, handTree := shape(hand)
	_, toolTree := shape(tool)
	if handTree != toolTree {
		t.Errorf("trees differ:\nhand: %s\ntool: %s", handTree, toolTree)
	}
	// And every reader takes them alike.
	view := func(dir, id string) map[string]any {
		code, out, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "show", "--json", id)
		if code != 0 {
			t.Fatalf("show %s: %s", id, errs)
		}
		var v map[string]any
		json.Unmarshal([]byte(out), &v)
		sp := v["spec"].(map[string]any)
		return map[string]any{"state": v["state"], "chat": sp["chat"], "argv": sp["argv"], "marker": v["marker"].(map[string]any)["attempt"], "id": sp["id"] == id}
	}
	h, s := view(hand, handID), view(tool, toolID)
	hb, _ := json.Marshal(h)
	sb, _ := json.Marshal(s)
	if string(hb) != string(sb) {
		t.Errorf("show differs:\nhand: %s\ntool: %s", hb, sb)
	}
}

// `spool ask` from inside a job, with the test playing the daemon: it
// turns the question event into progress, and `spool answer` answers it.
func TestSpoolAskAnswer(t *testing.T) {
	dir := newSpool(t)
	s, err := spool.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job, err := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	// A stale answer, to another question, must be ignored.
	s.WriteAnswer("c", &spool.Answer{Job: "old", Question: "q-old", Answer: "stale"})
	env := []string{"SPOOL_EVENTS=" + s.Path(job+".events"), "SPOOL_CHAT=c"}

	code, _, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "answer", "--chat", "c", "yes")
	if code != 1 {
		t.Errorf("answer with no run: exit %d %s; want 1", code, errs)
	}

	cmd := exec.Command(bin("spool"), "ask", "--options", "yes,no", "--timeout", "20s", "Go on?")
	cmd.Env = append(os.Environ(), env...)
	outPath := filepath.Join(t.TempDir(), "ask.out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout = outFile
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Play the daemon: wait for the question event, publish it.
	var q spool.Event
	eventually(t, 10*time.Second, 10*time.Millisecond, "the question event", func() bool {
		evs, _ := s.NewEventReader(job).Read()
		for _, ev := range evs {
			if ev.Type == spool.EventQuestion {
				q = ev
			}
		}
		return q.ID != ""
	})
	if q.Text != "Go on?" || strings.Join(q.Options, ",") != "yes,no" {
		t.Fatalf("question event: %+v", q)
	}
	p := &spool.Progress{Job: job, Chat: "c", State: spool.Running}
	p.Add(q)
	if err := s.WriteProgress(p); err != nil {
		t.Fatal(err)
	}
	code, _, errs = spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "answer", "--chat", "c", "--question", "q-other", "yes")
	if code != 1 {
		t.Errorf("answer to a question that is not open: exit %d %s; want 1", code, errs)
	}
	// ask has looked at answer.json since it asked; the stale answer
	// there must not have been taken. The sleep is the point: a window
	// in which ask must not take it.
	time.Sleep(100 * time.Millisecond)
	if b, _ := os.ReadFile(outPath); len(b) != 0 {
		t.Fatalf("ask took the stale answer: %q", b)
	}
	code, _, errs = spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "answer", "--chat", "c", "--question", q.ID, "yes")
	if code != 0 {
		t.Fatalf("answer: exit %d %s", code, errs)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ask: %v", err)
	}
	if b, _ := os.ReadFile(outPath); string(b) != "yes\n" {
		t.Errorf("ask printed %q, want yes", b)
	}
	a, err := s.ReadAnswer("c")
	if err != nil || a.Job != job || a.Question != q.ID || a.Answer != "yes" || a.At == 0 {
		t.Errorf("answer.json: %+v, %v", a, err)
	}
	// ask took the answer from answer.json with no daemon to relay it
	// (as when the job asks its next question before spoold has read
	// the file): the answer event is ask's own to append, once.
	if got := spoolAnswerEvents(t, s, job); got != q.ID+"=yes" {
		t.Errorf("answer events %q, want one, %s=yes", got, q.ID)
	}

	// No answer: 124 after the timeout.
	code, _, errs = spoolcliRun(t, env, "ask", "--timeout", "300ms", "Still there?")
	if code != 124 {
		t.Errorf("ask with no answer: exit %d %s; want 124", code, errs)
	}
}

// spoolAnswerEvents lists the job's answer events, "id=text" each.
func spoolAnswerEvents(t testing.TB, s *spool.Spool, job string) string {
	t.Helper()
	evs, err := s.NewEventReader(job).Read()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Type == spool.EventAnswer {
			got = append(got, ev.ID+"="+ev.Text)
		}
	}
	return strings.Join(got, " ")
}

func TestSpoolSay(t *testing.T) {
	dir := newSpool(t)
	code, out, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "submit", "--chat", "c", "--", "true")
	if code != 0 {
		t.Fatal(errs)
	}
	job := strings.TrimSpace(out)
	events := filepath.Join(dir, job+".events")
	for _, env := range [][]string{
		{"SPOOL_DIR=" + dir, "SPOOL_JOB=" + job},
		{"SPOOL_EVENTS=" + events},
	} {
		if code, _, errs := spoolcliRun(t, env, "say", "step", "one"); code != 0 {
			t.Fatalf("say with %v: exit %d %s", env, code, errs)
		}
	}
	// A shell with no spool at hand appends its own line.
	f, _ := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	io.WriteString(f, "plain line\n")
	f.Close()
	spoolcliRun(t, []string{"SPOOL_EVENTS=" + events}, "say", "last")
	b, _ := os.ReadFile(events)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("events: %q", b)
	}
	for i, want := range []string{"step one", "step one", "plain line", "last"} {
		ev := spool.ParseEventLine([]byte(lines[i]), int64(i+1))
		if ev.Text != want || ev.Type != spool.EventStatus {
			t.Errorf("line %d: %+v", i+1, ev)
		}
	}
	var last spool.Event
	json.Unmarshal([]byte(lines[3]), &last)
	if last.Seq != 4 {
		t.Errorf("seq of the last line %d, want 4 (its line number)", last.Seq)
	}
}

// cancel --wait returns once the job has a final state; the test plays
// the daemon that honours the request.
func TestSpoolCancelWait(t *testing.T) {
	dir := newSpool(t)
	s, _ := spool.Open(dir)
	defer s.Close()
	job, _ := s.Submit(&spool.Spec{Chat: "c", Argv: []string{"sleep", "1000"}})
	l, _, _ := s.Claim(job, spool.Lease{Worker: "w", Host: "h", PID: os.Getpid(), Chat: "c"})
	cmd := exec.Command(bin("spool"), "--spool", dir, "cancel", "--wait", "--timeout", "20s", job)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, 10*time.Millisecond, "the cancel request", func() bool {
		_, err := os.Stat(filepath.Join(dir, job+".cancel"))
		return err == nil
	})
	s.End(spool.Ending{Result: &spool.Result{Job: job, Chat: "c", State: spool.Cancelled, Attempt: l.Attempt}, Lease: l})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cancel --wait: %v", err)
	}
	if got := strings.TrimSpace(out.String()); got != job+" cancelled" {
		t.Errorf("cancel --wait printed %q", got)
	}
	// Nobody honours this one: 124.
	job2, _ := s.Submit(&spool.Spec{Chat: "d", Argv: []string{"x"}})
	if code, _, errs := spoolcliRun(t, nil, "--spool", dir, "cancel", "--wait", "--timeout", "200ms", job2); code != 124 {
		t.Errorf("cancel --wait with no daemon: exit %d %s", code, errs)
	}
}

// What spool submit and spool ask create is 0640 and 0750, whatever the
// caller's umask.
func TestSpoolModes(t *testing.T) {
	for _, mask := range []string{"000", "077"} {
		dir := newSpool(t)
		os.Chmod(dir, 0o750)
		sh := exec.Command("sh", "-c", "umask "+mask+` && job=$(spool submit --chat c -- true) &&
			SPOOL_JOB=$job SPOOL_CHAT=c spool ask --timeout 10ms "ok?"; test $? = 124 && SPOOL_JOB=$job spool say hi`)
		sh.Env = append(os.Environ(), "SPOOL_DIR="+dir)
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("umask %s: %v %s", mask, err, out)
		}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			fi, _ := os.Lstat(p)
			want := os.FileMode(0o640)
			if fi.IsDir() {
				want = 0o750
			}
			if fi.Mode().Perm() != want {
				t.Errorf("umask %s: %s is %03o, want %03o", mask, p, fi.Mode().Perm(), want)
			}
			return nil
		})
	}
}
