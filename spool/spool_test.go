package spool

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testSpool makes a spool with its subdirectories in a temporary directory.
func testSpool(t testing.TB) *Spool {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tree lists every name under the spool (relative, sorted), for comparing
// a tree before and after an operation that must change nothing.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." {
			names = append(names, rel)
		}
		return nil
	})
	sort.Strings(names)
	return names
}

func writeRaw(t testing.TB, s *Spool, name, content string) {
	t.Helper()
	p := s.Path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func exists(s *Spool, name string) bool {
	_, err := os.Lstat(s.Path(name))
	return err == nil
}

func argvSpec(chat string, argv ...string) *Spec { return &Spec{Chat: chat, Argv: argv} }

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"01JD3V8Q9S0000000000000000", true},
		{"20260101T000000-123", true},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", true},
		{"a.b_c-d", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{strings.Repeat("x", 200), false},
		{"", false},
		{".hidden", false},
		{"_x", false},
		{"-x", false},
		{"..", false},
		{"a/b", false},
		{"../x", false},
		{"a\x00b", false},
		{"a b", false},
		{"ü", false},
		{"a\n", false},
	} {
		if got := ValidID(tc.id); got != tc.ok {
			t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.ok)
		}
		err := CheckJobID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckJobID(%q) = %v", tc.id, err)
		}
		if err != nil && (!errors.Is(err, ErrInvalidID) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckJobID(%q) = %q: want one line wrapping ErrInvalidID", tc.id, err)
		}
		if err := CheckChatID(tc.id); (err == nil) != tc.ok {
			t.Errorf("CheckChatID(%q) = %v", tc.id, err)
		}
	}
}

func TestNewJobIDSortsByTime(t *testing.T) {
	t0 := time.Now()
	a, b := NewJobID(t0), NewJobID(t0.Add(time.Millisecond))
	if !ValidID(a) || len(a) != 26 || !(a < b) {
		t.Fatalf("NewJobID: %q then %q", a, b)
	}
}

// Ids made in the same millisecond differ in their 80 random bits, and
// differ a lot: the entropy is the kernel's, not a counter.
func TestNewJobIDRandom(t *testing.T) {
	t0 := time.Now()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewJobID(t0)
		if seen[id] {
			t.Fatalf("NewJobID made %q twice", id)
		}
		seen[id] = true
	}
	var p [64]byte
	if n, err := (kernelRandom{}).Read(p[:]); n != len(p) || err != nil || p == [64]byte{} {
		t.Fatalf("kernelRandom.Read = %d, %v, %x", n, err, p)
	}
}

func TestLocate(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name, flag string
		env        func(string) string
		uid        int
		want       string
	}{
		{"flag wins", "/f", env("SPOOL_DIR", "/s", "JOBS_DIR", "/j"), 1000, "/f"},
		{"SPOOL_DIR", "", env("SPOOL_DIR", "/s", "JOBS_DIR", "/j"), 1000, "/s"},
		{"JOBS_DIR", "", env("JOBS_DIR", "/j"), 0, "/j"},
		{"root", "", env("HOME", "/root"), 0, DefaultRoot},
		{"XDG", "", env("XDG_STATE_HOME", "/x", "HOME", "/h"), 1000, "/x/vmspool"},
		{"HOME", "", env("HOME", "/h"), 1000, "/h/.local/state/vmspool"},
	} {
		if got := Locate(tc.flag, tc.env, tc.uid); got != tc.want {
			t.Errorf("%s: Locate = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLocateSystem: with no flag and no variable, the service user and
// the spool's group find the system spool (they may read it); anyone else,
// or anyone with a per-user spool, the per-user one. The advice for a
// missing spool is right for who asks.
func TestLocateSystem(t *testing.T) {
	d := t.TempDir()
	system, home := filepath.Join(d, "vm"), filepath.Join(d, "home")
	for _, p := range []string{system, home} {
		if err := os.Mkdir(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	user := filepath.Join(home, ".local", "state", "vmspool")
	yes := func(string) bool { return true }
	no := func(string) bool { return false }
	for _, tc := range []struct {
		name     string
		system   string
		readable func(string) bool
		want     string
	}{
		{"a reader of the system spool", system, yes, system},
		{"one it is closed to", system, no, user},
		{"no system spool", filepath.Join(d, "none"), yes, user},
	} {
		if got := locate("", env, 1000, tc.system, tc.readable); got != tc.want {
			t.Errorf("%s: locate = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := locate("", env, 0, system, no); got != system {
		t.Errorf("root: locate = %q, want %q", got, system)
	}
	if got := locate("", func(k string) string {
		if k == "SPOOL_DIR" {
			return "/s"
		}
		return env(k)
	}, 1000, system, yes); got != "/s" {
		t.Errorf("SPOOL_DIR: locate = %q, want /s", got)
	}
	if err := os.MkdirAll(user, 0o750); err != nil {
		t.Fatal(err)
	}
	if got := locate("", env, 1000, system, yes); got != user {
		t.Errorf("a per-user spool that exists: locate = %q, want %q", got, user)
	}

	for _, tc := range []struct {
		name, dir string
		readable  func(string) bool
		want      string
	}{
		{"the system spool missing", system, yes, "start spoold"},
		{"closed to the caller", user, no, "the system spool " + system + " is there but closed to you: join its group"},
		{"the caller's own", user, yes, "mkdir -p " + user + " (spoold makes the rest)"},
	} {
		if got := adviceFor(tc.dir, system, tc.readable); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: advice %q, want it to start %q", tc.name, got, tc.want)
		}
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		name, job, ext string
		ok             bool
	}{
		{"a.json", "a", ExtSpec, true},
		{"a.b.ready", "a.b", ExtReady, true},
		{"J.running", "J", ExtRunning, true},
		{"J.done", "J", ExtDone, true},
		{"J.failed", "J", ExtFailed, true},
		{"J.cancelled", "J", ExtCancelled, true},
		{"J.cancel", "J", ExtCancel, true},
		{"J.events", "J", ExtEvents, true},
		{"J.log", "J", ExtLog, true},
		{".J.json", "", "", false},
		{".J.json123", "", "", false},
		{"progress", "", "", false},
		{"J.txt", "", "", false},
		{".json", "", "", false},
		{"", "", "", false},
	} {
		job, ext, ok := SplitName(tc.name)
		if job != tc.job || ext != tc.ext || ok != tc.ok {
			t.Errorf("SplitName(%q) = %q, %q, %v", tc.name, job, ext, ok)
		}
	}
}

func TestFilesState(t *testing.T) {
	for _, tc := range []struct {
		f      Files
		st     State
		ok     bool
		states int
	}{
		{HasSpec, New, true, 0},
		{HasSpec | HasReady, Queued, true, 1},
		{HasSpec | HasRunning | HasEvents, Running, true, 1},
		{HasSpec | HasRunning | HasReady, Running, true, 2},
		{HasSpec | HasDone | HasRunning, Done, true, 2},
		{HasSpec | HasFailed | HasReady, Failed, true, 2},
		{HasCancelled, Cancelled, true, 1},
		{HasDone | HasFailed, Done, true, 2},
		{HasEvents | HasLog | HasCancel, "", false, 0},
		{HasReady, Queued, true, 1},
	} {
		st, ok := tc.f.State()
		if st != tc.st || ok != tc.ok || tc.f.States() != tc.states {
			t.Errorf("Files(%b).State() = %q, %v, States %d", tc.f, st, ok, tc.f.States())
		}
	}
	for _, st := range []State{New, Queued, Running, Done, Failed, Cancelled} {
		if got, ok := ParseState(string(st)); !ok || got != st {
			t.Errorf("ParseState(%q) = %q, %v", st, got, ok)
		}
		if st.Ext() == "" {
			t.Errorf("%s.Ext() is empty", st)
		}
	}
	if _, ok := ParseState("waiting"); ok {
		t.Error("ParseState(waiting): a progress state, not a job state")
	}
}

func TestOpenMissingSpool(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, ErrNoSpool) {
		t.Fatalf("Open of a missing dir = %v, want ErrNoSpool", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o640)
	if _, err := Open(f); err == nil {
		t.Fatal("Open of a file: no error")
	}
}

// Every document 0640, every directory 0750, whatever the umask.
func TestModesIgnoreUmask(t *testing.T) {
	for _, mask := range []int{0, 0o077} {
		old := syscall.Umask(mask)
		func() {
			defer syscall.Umask(old)
			s := testSpool(t)
			id, err := s.Submit(argvSpec("c", "true"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendEvent(id, Event{Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			lf, err := s.OpenLog(id)
			if err != nil {
				t.Fatal(err)
			}
			lf.Close()
			if err := s.WriteProgress(&Progress{Job: id, Chat: "c"}); err != nil {
				t.Fatal(err)
			}
			if err := s.WriteAnswer("c", &Answer{Job: id, Question: "q", Answer: "a"}); err != nil {
				t.Fatal(err)
			}
			f, ok, err := s.LockChat("c")
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			f.Close()
			if err := s.RequestCancel(id, "test"); err != nil {
				t.Fatal(err)
			}
			l, _, err := s.Claim(id, Lease{Worker: "w", Host: "h", PID: 1})
			if err != nil || l == nil {
				t.Fatal(l, err)
			}
			if err := s.End(Ending{Result: &Result{Job: id, Chat: "c", State: Done}, Lease: l}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Quarantine(id+ExtLog, "test"); err != nil {
				t.Fatal(err)
			}
			filepath.WalkDir(s.RootPath, func(p string, d fs.DirEntry, err error) error {
				fi, _ := os.Lstat(p)
				want := FileMode
				if fi.IsDir() {
					want = DirMode
				}
				if fi.Mode().Perm() != want {
					t.Errorf("umask %03o: %s has mode %03o, want %03o", mask, p, fi.Mode().Perm(), want)
				}
				return nil
			})
		}()
	}
}

func TestSubmitTree(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "progress/c", `{"job":"old","chat":"c"}`)
	writeRaw(t, s, "chats/c/answer.json", `{"job":"old"}`)
	tm := "30m"
	_ = tm
	id, err := s.Submit(&Spec{Chat: "c", Argv: []string{"echo", "hi"}, Timeout: Duration(30 * time.Minute), Attempts: 3, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(id) || len(id) != 26 {
		t.Fatalf("id %q: want a ULID", id)
	}
	if exists(s, "progress/c") || exists(s, "chats/c/answer.json") {
		t.Error("Submit left the chat's previous progress or answer")
	}
	if st, err := s.State(id); err != nil || st != Queued {
		t.Fatalf("State = %q, %v", st, err)
	}
	sp, err := s.ReadSpec(id)
	if err != nil {
		t.Fatal(err)
	}
	if sp.ID != id || sp.Chat != "c" || sp.Created == 0 || sp.MaxTries() != 3 || time.Duration(sp.Timeout) != 30*time.Minute || sp.Env["A"] != "1" {
		t.Errorf("spec read back: %+v", sp)
	}
	b, _ := os.ReadFile(s.Path(id + ExtSpec))
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["timeout"] != "30m0s" {
		t.Errorf("spec on disk: %s", b)
	}
	if fi, _ := os.Stat(s.Path(id + ExtReady)); fi.Size() != 0 {
		t.Error("a submission's marker is not empty")
	}
	m, err := s.ReadMarker(id)
	if err != nil || m.Attempt != 1 || time.Since(m.NotBefore) > time.Minute {
		t.Errorf("ReadMarker = %+v, %v", m, err)
	}
	if _, err := s.Submit(&Spec{ID: id, Chat: "c", Argv: []string{"x"}}); err == nil {
		t.Error("a second Submit with the same id: no error")
	}
}

func TestSubmitBadSpecLeavesNothing(t *testing.T) {
	script := "echo hi"
	empty := "  \n"
	for _, tc := range []struct {
		name string
		sp   Spec
	}{
		{"no chat", Spec{Argv: []string{"x"}}},
		{"bad chat", Spec{Chat: "../x", Argv: []string{"x"}}},
		{"bad id", Spec{ID: ".x", Chat: "c", Argv: []string{"x"}}},
		{"both", Spec{Chat: "c", Argv: []string{"x"}, Script: &script}},
		{"neither", Spec{Chat: "c"}},
		{"empty argv", Spec{Chat: "c", Argv: []string{}}},
		{"empty argv0", Spec{Chat: "c", Argv: []string{""}}},
		{"empty script", Spec{Chat: "c", Script: &empty}},
		{"NUL", Spec{Chat: "c", Argv: []string{"a\x00"}}},
		{"env name", Spec{Chat: "c", Argv: []string{"a"}, Env: map[string]string{"A=B": "x"}}},
		{"attempts", Spec{Chat: "c", Argv: []string{"a"}, Attempts: MaxAttempts + 1}},
	} {
		s := testSpool(t)
		writeRaw(t, s, "progress/c", "{}")
		before := tree(t, s.RootPath)
		if _, err := s.Submit(&tc.sp); err == nil {
			t.Errorf("%s: Submit: no error", tc.name)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error of more than one line: %q", tc.name, err)
		}
		if after := tree(t, s.RootPath); strings.Join(before, " ") != strings.Join(after, " ") {
			t.Errorf("%s: tree changed: %v -> %v", tc.name, before, after)
		}
	}
}

// A symlink planted in the chat's places is removed; its target stays.
func TestSubmitRemovesSymlinksNotTargets(t *testing.T) {
	s := testSpool(t)
	outside := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(outside, []byte("keep"), 0o600)
	os.MkdirAll(s.Path("chats/c"), 0o750)
	if err := os.Symlink(outside, s.Path("progress/c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, s.Path("chats/c/answer.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(argvSpec("c", "true")); err != nil {
		t.Fatal(err)
	}
	if exists(s, "progress/c") || exists(s, "chats/c/answer.json") {
		t.Error("symlinks left in place")
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Errorf("the link's target was touched: %q, %v", b, err)
	}
}

func TestReadSpec(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "hand.json", `{"chat":"nightly","argv":["make","backup"],"unknown":1}`)
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(s.Path("hand.json"), past, past)
	sp, err := s.ReadSpec("hand")
	if err != nil {
		t.Fatal(err)
	}
	if sp.ID != "hand" || !TimeOf(sp.Created).Equal(past) {
		t.Errorf("hand spec: id %q created %v, want hand and %v", sp.ID, TimeOf(sp.Created), past)
	}
	writeRaw(t, s, "other.json", `{"id":"notme","chat":"c","argv":["x"]}`)
	if _, err := s.ReadSpec("other"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("spec whose id is not its name: %v", err)
	}
	writeRaw(t, s, "t.json", `{"chat":"c","argv":["x"],"timeout":90}`)
	if sp, err := s.ReadSpec("t"); err != nil || time.Duration(sp.Timeout) != 90*time.Second {
		t.Errorf("numeric timeout: %+v, %v", sp, err)
	}
	os.Symlink(s.Path("hand.json"), s.Path("link.json"))
	if _, err := s.ReadSpec("link"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("symlinked spec: %v, want ErrNotRegular", err)
	}
	os.Mkdir(s.Path("dir.json"), 0o750)
	if _, err := s.ReadSpec("dir"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("directory spec: %v, want ErrNotRegular", err)
	}
	if err := syscall.Mkfifo(s.Path("fifo.json"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadSpec("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO spec: %v, want ErrNotRegular", err)
	}
	big := `{"chat":"c","argv":["` + strings.Repeat("x", MaxDocument) + `"]}`
	writeRaw(t, s, "big.json", big)
	if _, err := s.ReadSpec("big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized spec: %v, want ErrTooLarge", err)
	}
	if _, err := s.ReadSpec("../x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := s.ReadSpec("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing spec: %v", err)
	}
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"chat":"c","argv":["x"]}`, true},
		{`{"chat":"c","script":"echo hi"}`, true},
		{` {"chat":"c","argv":["x"],"timeout":"45m","attempts":2,"env":{"A":"b"},"cwd":"/tmp"} `, true},
		{`{"chat":"c","argv":["x"],"timeout":"1.5"}`, true},
		{`{"chat":"c","argv":["x"],"timeout":null}`, true},
		{`{"chat":"c","argv":["x"],"script":"y"}`, false},
		{`{"chat":"c"}`, false},
		{`{"chat":"c","argv":null,"script":null}`, false},
		{`{"argv":["x"]}`, false},
		{`{"chat":"","argv":["x"]}`, false},
		{`{"chat":"a/b","argv":["x"]}`, false},
		{`{"chat":"c","argv":[]}`, false},
		{`{"chat":"c","argv":"x"}`, false},
		{`{"chat":"c","argv":["x"],"timeout":"soon"}`, false},
		{`{"chat":"c","argv":["x"],"timeout":-1}`, false},
		{`{"chat":"c","argv":["x"],"attempts":-1}`, false},
		{`[]`, false},
		{``, false},
		{`{"chat":"c","argv":["x"]`, false},
		{`null`, false},
	} {
		_, err := ParseSpec([]byte(tc.doc))
		if (err == nil) != tc.ok {
			t.Errorf("ParseSpec(%s) = %v", tc.doc, err)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseSpec(%s) = %v: want ErrCorrupt", tc.doc, err)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"45m"`, 45 * time.Minute, true},
		{`2700`, 45 * time.Minute, true},
		{`0.5`, 500 * time.Millisecond, true},
		{`"90"`, 90 * time.Second, true},
		{`""`, 0, true},
		{`null`, 0, true},
		{`"-1s"`, 0, false},
		{`1e12`, 0, false},
		{`true`, 0, false},
		// The flags' grammar (ParseDuration): days, and nothing ParseFloat
		// alone would take.
		{`"7d"`, 7 * 24 * time.Hour, true},
		{`"1.5d"`, 36 * time.Hour, true},
		{`"+5m"`, 5 * time.Minute, true},
		{`"200000d"`, 0, false},
		{`"inf"`, 0, false},
		{`"1e3"`, 0, false},
		{`"-5"`, 0, false},
		{`"9999999999h"`, 0, false},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if (err == nil) != tc.ok || (tc.ok && time.Duration(d) != tc.want) {
			t.Errorf("Duration(%s) = %v, %v", tc.in, time.Duration(d), err)
		}
	}
	b, _ := json.Marshal(Duration(90 * time.Second))
	if string(b) != `"1m30s"` {
		t.Errorf("Marshal: %s", b)
	}
}

func TestTimeStamps(t *testing.T) {
	now := time.Now()
	if d := TimeOf(Stamp(now)).Sub(now); d > time.Microsecond || d < -time.Microsecond {
		t.Errorf("TimeOf(Stamp(t)) off by %v", d)
	}
	if got := Round2(1700000000.123456); got != 1700000000.12 {
		t.Errorf("Round2 = %v", got)
	}
}

func testLease(worker string) Lease {
	return Lease{Worker: worker, Host: "h", PID: os.Getpid(), LeaseS: 30}
}

// Of many claimers of one job exactly one wins; the others get (nil, nil,
// nil): losing is not an error (invariant 3).
func TestClaimRace(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(argvSpec("c", "true"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, errs := 0, 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, _, err := s.Claim(id, testLease("w"+string(rune('a'+i))))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
			}
			if l != nil {
				wins++
			}
		}(i)
	}
	wg.Wait()
	if wins != 1 || errs != 0 {
		t.Fatalf("%d claimers won, %d errors; want 1 and 0", wins, errs)
	}
	l, fi, err := s.ReadLease(id)
	if err != nil || l.Attempt != 1 || l.First != 1 || l.Job != id || l.Claimed == 0 || fi == nil {
		t.Fatalf("lease: %+v, %v", l, err)
	}
	if l, p, err := s.Claim("nosuch", testLease("x")); l != nil || p != nil || err != nil {
		t.Errorf("claim of a job that is not queued: %v %v %v", l, p, err)
	}
}

// The attempt number goes on across recoveries (same budget) and across a
// `spool requeue` (a new budget).
func TestAttemptNumbering(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(&Spec{Chat: "c", Argv: []string{"x"}, Attempts: 2})
	l1, prev, err := s.Claim(id, testLease("w1"))
	if err != nil || l1 == nil || prev != nil || l1.Tries() != 1 {
		t.Fatal(l1, prev, err)
	}
	l1.PGID = 4242
	if err := s.UpdateLease(l1); err != nil {
		t.Fatal(err)
	}
	nb := time.Now().Add(time.Hour).Truncate(time.Second)
	if ok, err := s.Requeue(l1, nb); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m, err := s.ReadMarker(id)
	if err != nil || m.Attempt != 2 || !m.NotBefore.Equal(nb) {
		t.Fatalf("marker after requeue: %+v, %v (not before %v)", m, err, nb)
	}
	l2, prev, err := s.Claim(id, testLease("w2"))
	if err != nil || l2 == nil || prev == nil {
		t.Fatal(l2, prev, err)
	}
	if prev.Worker != "w1" || prev.PGID != 4242 || l2.Attempt != 2 || l2.First != 1 || l2.Tries() != 2 {
		t.Fatalf("second claim: lease %+v prev %+v", l2, prev)
	}
	// The old holder has lost its lease.
	if err := s.Heartbeat(l1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Heartbeat of a lost lease = %v", err)
	}
	if err := s.UpdateLease(l1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("UpdateLease of a lost lease = %v", err)
	}
	if ok, err := s.Requeue(l1, time.Now()); ok || err != nil {
		t.Errorf("Requeue with a stale lease = %v, %v", ok, err)
	}
	r := &Result{Job: id, Chat: "c", State: Failed, Attempt: l2.Attempt, First: l2.First, Worker: "w2"}
	r.Errorf("exit %d", 1)
	if err := s.End(Ending{Result: r, Lease: l2, Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	if exists(s, id+ExtRunning) {
		t.Error("End left the lease")
	}
	got, err := s.ReadResult(id, Failed)
	if err != nil || got.Error == nil || *got.Error != "exit 1" || got.Finished == 0 {
		t.Fatalf("result: %+v, %v", got, err)
	}
	s.RequestCancel(id, "x")
	if st, err := s.RequeueEnded(id); err != nil || st != Failed {
		t.Fatal(st, err)
	}
	if exists(s, id+ExtCancel) || exists(s, id+ExtFailed) {
		t.Error("RequeueEnded left the cancel request or the result")
	}
	l3, prev, err := s.Claim(id, testLease("w3"))
	if err != nil || l3 == nil {
		t.Fatal(l3, err)
	}
	if prev != nil {
		t.Errorf("a requeued result taken for a recovered lease: prev %+v", prev)
	}
	if l3.Attempt != 3 || l3.First != 3 || l3.Tries() != 1 {
		t.Errorf("claim after requeue: attempt %d first %d tries %d; want 3 3 1", l3.Attempt, l3.First, l3.Tries())
	}
}

func TestRequeueEndedRefusesOthers(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(argvSpec("c", "x"))
	if st, err := s.RequeueEnded(id); err == nil || st != Queued {
		t.Errorf("RequeueEnded of a queued job = %q, %v", st, err)
	}
	l, _, _ := s.Claim(id, testLease("w"))
	s.End(Ending{Result: &Result{Job: id, Chat: "c", State: Done, Attempt: l.Attempt}, Lease: l})
	if st, err := s.RequeueEnded(id); err == nil || st != Done {
		t.Errorf("RequeueEnded of a done job = %q, %v", st, err)
	}
	if _, err := s.RequeueEnded("nosuch"); !errors.Is(err, ErrNoJob) {
		t.Errorf("RequeueEnded of no job = %v", err)
	}
	if err := s.End(Ending{Result: &Result{Job: id, State: Running}}); err == nil {
		t.Error("End with a non-final state: no error")
	}
}

func TestHeartbeat(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(argvSpec("c", "x"))
	l, _, _ := s.Claim(id, testLease("w"))
	old := time.Now().Add(-time.Hour)
	os.Chtimes(s.Path(id+ExtRunning), old, old)
	if err := s.Heartbeat(l); err != nil {
		t.Fatal(err)
	}
	_, fi, _ := s.ReadLease(id)
	if time.Since(fi.ModTime()) > time.Minute {
		t.Error("Heartbeat did not move the mtime")
	}
	s.End(Ending{Result: &Result{Job: id, State: Done}, Lease: l})
	if err := s.Heartbeat(l); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Heartbeat after the lease went: %v", err)
	}
}

func TestReadLeaseCorrupt(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "j.running", "")
	if _, fi, err := s.ReadLease("j"); !errors.Is(err, ErrCorrupt) || fi == nil {
		t.Errorf("empty lease: %v (fi %v)", err, fi)
	}
	writeRaw(t, s, "j.running", "{not json")
	if _, _, err := s.ReadLease("j"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unparsable lease: %v", err)
	}
	// A corrupt lease can still be requeued by a recoverer.
	if ok, err := s.Requeue(&Lease{Job: "j"}, time.Now()); !ok || err != nil {
		t.Errorf("Requeue of a corrupt lease = %v, %v", ok, err)
	}
}

func TestLeaseAlive(t *testing.T) {
	boot := BootID()
	st, err := ProcessStart(os.Getpid())
	if err != nil {
		t.Skip("no /proc:", err)
	}
	for _, tc := range []struct {
		name         string
		l            Lease
		known, alive bool
		// What ByProcess says: a live process decides only when the
		// lease names it exactly; elsewhere the heartbeat decides.
		decides bool
	}{
		{"me", Lease{Host: "h", PID: os.Getpid(), PIDStart: st, Boot: boot}, true, true, true},
		{"no start recorded", Lease{Host: "h", PID: os.Getpid()}, true, true, false},
		{"no boot recorded", Lease{Host: "h", PID: os.Getpid(), PIDStart: st}, true, true, false},
		{"pid reused", Lease{Host: "h", PID: os.Getpid(), PIDStart: st + 1, Boot: boot}, true, false, true},
		{"other boot", Lease{Host: "h", PID: os.Getpid(), PIDStart: st, Boot: "x"}, true, false, true},
		{"gone", Lease{Host: "h", PID: 1 << 30}, true, false, true},
		{"other host", Lease{Host: "elsewhere", PID: os.Getpid()}, false, false, false},
	} {
		known, alive := tc.l.Alive("h", boot)
		if known != tc.known || alive != tc.alive {
			t.Errorf("%s: Alive = %v, %v", tc.name, known, alive)
		}
		decides, palive := tc.l.ByProcess("h", boot)
		if decides != tc.decides || (decides && palive != tc.alive) {
			t.Errorf("%s: ByProcess = %v, %v; want %v, %v", tc.name, decides, palive, tc.decides, tc.alive)
		}
	}
	// A lease that names another program's live process exactly (planted
	// naming pid 1) is left to its heartbeat, not believed for ever.
	if comm, st1, err := processStat(1); err == nil && !strings.HasPrefix(comm, "spool") {
		l := Lease{Host: "h", PID: 1, PIDStart: st1, Boot: boot}
		if decides, _ := l.ByProcess("h", boot); decides {
			t.Errorf("a lease naming pid 1 (%s) is judged by its process", comm)
		}
	}
}

func TestLocks(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(argvSpec("c", "x"))
	if locked, err := s.SpecLocked(id); err != nil || locked {
		t.Fatal(locked, err)
	}
	f, ok, err := s.LockSpec(id)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if locked, err := s.SpecLocked(id); err != nil || !locked {
		t.Errorf("SpecLocked while held = %v, %v", locked, err)
	}
	f.Close()
	if locked, _ := s.SpecLocked(id); locked {
		t.Error("SpecLocked after release")
	}
	c1, ok, err := s.LockChat("c")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if c2, ok, err := s.LockChat("c"); ok || err != nil || c2 != nil {
		t.Errorf("second LockChat = %v, %v, %v", c2, ok, err)
	}
	c1.Close()
	if _, _, err := s.LockChat("../x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("LockChat of a bad id: %v", err)
	}
}

func TestProgressRoundTrip(t *testing.T) {
	s := testSpool(t)
	p := &Progress{Job: "j", Chat: "c", State: Running}
	for i := 1; i <= 100; i++ {
		p.Add(Event{Seq: int64(i), Type: EventStatus, Text: "step"})
	}
	p.Add(Event{Seq: 50, Text: "old"})
	if l := p.Latest(); len(l) != MaxProgressEvents || p.Seq != 100 || l[0].Seq != 37 || p.Status != "step" || len(p.Events) > 2*MaxProgressEvents {
		t.Fatalf("after 100 events: %d latest of %d kept, seq %d, first %d", len(l), len(p.Events), p.Seq, l[0].Seq)
	}
	p.Add(Event{Seq: 101, Type: EventQuestion, ID: "q1", Text: "go on?"})
	if p.State != Waiting || p.Question == nil || p.Question.ID != "q1" || p.Question.Options == nil {
		t.Fatalf("question: %+v", p.Question)
	}
	p.Add(Event{Seq: 102, Type: EventAnswer, ID: "q0", Text: "stale"})
	if p.Question == nil {
		t.Fatal("an answer to another question closed the question")
	}
	p.Add(Event{Seq: 103, Type: EventAnswer, ID: "q1", Text: "yes"})
	if p.Question != nil || p.State != Running {
		t.Fatalf("answer: question %+v state %s", p.Question, p.State)
	}
	if err := s.WriteProgress(p); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadProgress("c")
	if err != nil || got.Seq != 103 || got.Updated == 0 || len(got.Events) != MaxProgressEvents {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	b, _ := os.ReadFile(s.Path("progress/c"))
	var raw map[string]any
	json.Unmarshal(b, &raw)
	for _, k := range []string{"job", "chat", "seq", "updated", "started", "done", "state", "status", "events", "question", "exit", "error"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("progress document lacks %q", k)
		}
	}
	os.Remove(s.Path("progress/c"))
	os.Symlink("/etc/passwd", s.Path("progress/c"))
	if _, err := s.ReadProgress("c"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("symlinked progress: %v", err)
	}
	if _, err := ParseProgress([]byte(`{"chat":"../x"}`)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("progress with a bad chat: %v", err)
	}
	if _, err := ParseProgress([]byte(`{`)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unparsable progress: %v", err)
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	s := testSpool(t)
	if err := s.WriteAnswer("c", &Answer{Job: "j", Question: "q1", Answer: "yes"}); err != nil {
		t.Fatal(err)
	}
	a, err := s.ReadAnswer("c")
	if err != nil || a.Question != "q1" || a.Answer != "yes" || a.At == 0 {
		t.Fatalf("%+v, %v", a, err)
	}
	writeRaw(t, s, "chats/d/answer.json", "nope")
	if _, err := s.ReadAnswer("d"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unparsable answer: %v", err)
	}
	os.MkdirAll(filepath.Join(t.TempDir(), "x"), 0o750)
	os.Symlink(t.TempDir(), s.Path("chats/e"))
	if err := s.WriteAnswer("e", &Answer{}); err == nil {
		t.Error("WriteAnswer through a symlinked chat directory: no error")
	}
}

func TestQuarantine(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "j.json", "garbage")
	dst, err := s.Quarantine("j.json", "does not parse")
	if err != nil || dst != "j.json" {
		t.Fatal(dst, err)
	}
	if exists(s, "j.json") || !exists(s, "corrupt/j.json") {
		t.Error("not moved")
	}
	if b, _ := os.ReadFile(s.Path("corrupt/j.json.why")); string(b) != "does not parse\n" {
		t.Errorf("why: %q", b)
	}
	writeRaw(t, s, "j.json", "garbage again")
	if dst, err := s.Quarantine("j.json", "again"); err != nil || dst != "j.json.1" {
		t.Errorf("second quarantine of a name: %q, %v", dst, err)
	}
	writeRaw(t, s, "progress/c", "{")
	if dst, err := s.Quarantine("progress/c", "bad"); err != nil || dst != "progress_c" || !exists(s, "corrupt/progress_c.why") {
		t.Errorf("quarantine of progress/c: %q, %v", dst, err)
	}
	if _, err := s.Quarantine("..", "x"); err == nil {
		t.Error("quarantine of ..: no error")
	}
}

func TestRemoveAndStat(t *testing.T) {
	s := testSpool(t)
	if err := s.Remove("nothing"); err != nil {
		t.Error(err)
	}
	os.Mkdir(s.Path("d.json"), 0o750)
	if err := s.Remove("d.json"); err == nil {
		t.Error("Remove of a directory: no error")
	}
	writeRaw(t, s, "x.log", "x")
	if _, err := s.Stat("x.log"); err != nil {
		t.Error(err)
	}
}

func TestScanAndJobFiles(t *testing.T) {
	s := testSpool(t)
	for _, n := range []string{"a.json", "a.ready", "b.json", "b.done", "b.events", ".a.json123", "junk.txt"} {
		writeRaw(t, s, n, "")
	}
	jobs, other, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs["a"] != HasSpec|HasReady || jobs["b"] != HasSpec|HasDone|HasEvents {
		t.Errorf("Scan jobs = %v", jobs)
	}
	sort.Strings(other)
	if strings.Join(other, " ") != ".a.json123 chats corrupt doorbell gate junk.txt progress" {
		t.Errorf("Scan other = %v", other)
	}
	if ids := SortedIDs(jobs); strings.Join(ids, " ") != "a b" {
		t.Errorf("SortedIDs = %v", ids)
	}
	if f, err := s.JobFiles("b"); err != nil || f != jobs["b"] {
		t.Errorf("JobFiles = %b, %v", f, err)
	}
	if _, err := s.State("nosuch"); !errors.Is(err, ErrNoJob) {
		t.Errorf("State of no job = %v", err)
	}
}
