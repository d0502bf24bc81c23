package tests

// A hostile tree: whoever can write into the spool plants symlinks,
// directories, FIFOs and a 1 GB spec where documents should be, while
// spoold runs as root. Nothing outside the spool may be read, written or
// followed; each case is refused (the job ends failed with the reason) or
// quarantined (moved into corrupt/ with a .why), and the daemon goes on.
// And the tree's modes: directories 0750 and documents 0640 whatever the
// umask.

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// hostileOutside is what lives outside the spool: a file and a directory
// that symlinks point to, with what they held and when, to check that
// nothing touched them.
type hostileOutside struct {
	dir, file, sub string
	content        []byte
	mtime          time.Time
}

func hostileMakeOutside(t *testing.T) *hostileOutside {
	t.Helper()
	o := &hostileOutside{dir: t.TempDir()}
	o.file = filepath.Join(o.dir, "secret")
	o.sub = filepath.Join(o.dir, "sub")
	o.content = []byte(`{"job":"x","chat":"x","question":"q","answer":"the secret","worker":"w","state":"done"}` + "\n")
	if err := os.WriteFile(o.file, o.content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(o.sub, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, p := range []string{o.file, o.sub} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	fi, _ := os.Stat(o.file)
	o.mtime = fi.ModTime()
	return o
}

// check: the file holds what it held, unchanged since, and nothing new
// appeared beside it or in the directory.
func (o *hostileOutside) check(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(o.file)
	if err != nil || !bytes.Equal(b, o.content) {
		t.Errorf("the file outside the spool was changed: %q %v", b, err)
	}
	if fi, err := os.Stat(o.file); err != nil || !fi.ModTime().Equal(o.mtime) || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file outside the spool was touched: %v %v", fi.ModTime(), err)
	}
	for _, d := range []string{o.dir, o.sub} {
		names, _ := os.ReadDir(d)
		for _, n := range names {
			if n.Name() != "secret" && n.Name() != "sub" {
				t.Errorf("something was written outside the spool: %s", filepath.Join(d, n.Name()))
			}
		}
	}
}

// hostileQueue hand-queues a job whose names were tampered with first:
// plant runs after the spec is written and before the marker appears.
func hostileQueue(t *testing.T, s *spool.Spool, id, chat string, argv []string, plant func()) {
	t.Helper()
	spec := fmt.Sprintf(`{"chat":%q,"argv":[%s]}`, chat, `"`+strings.Join(argv, `","`)+`"`)
	if err := os.WriteFile(s.Path(id+".json"), []byte(spec), 0o640); err != nil {
		t.Fatal(err)
	}
	if plant != nil {
		plant()
	}
	if err := os.WriteFile(s.Path(id+".ready"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
}

func hostileMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestHostileTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the hostile tree is a test of spoold running as root; run it as root")
	}
	dir := newSpool(t)
	out := hostileMakeOutside(t)
	d := relStart(t, "spoold", "--spool", dir, "--workers", "4", "--lease", "2s", "--rescan", "1s", "--metrics-file", "off")
	s := openSpool(t, dir, 300)
	eventually(t, 10*time.Second, 20*time.Millisecond, "the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, spool.GateDir))
		return err == nil
	})
	link := func(name, target string) { hostileMust(t, os.Symlink(target, s.Path(name))) }
	submit := func(args ...string) (string, string, error) {
		cmd := command(raceEnv(), "spool", append([]string{"--spool", dir, "submit"}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("spool submit %q: %v: %s", args, err, e.String())
		}
		return strings.TrimSpace(o.String()), e.String(), err
	}

	// progress/<chat> is a link outside: `spool submit` removes the link
	// (invariant 6), never its target, and the run's progress is the
	// daemon's own document.
	link("progress/hp", out.file)
	hp, _, err := submit("--chat", "hp", "--", "sh", "-c", "spool say one; sleep 1; spool say two")
	hostileMust(t, err)
	if fi, err := os.Lstat(s.Path("progress/hp")); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("spool submit left the symlink at progress/hp")
	}
	// Planted again while the job runs: the next flush replaces the link.
	eventually(t, 10*time.Second, 20*time.Millisecond, "job hp to run", func() bool { st, _ := s.State(hp); return st == spool.Running })
	os.Remove(s.Path("progress/hp"))
	link("progress/hp", out.file)

	// chats/<chat>/answer.json is a link outside while a question is open:
	// not taken as the answer, and `spool answer` replaces the link.
	ha, _, err := submit("--chat", "ha", "--", "sh", "-c", `a=$(spool ask --timeout 30s "ok?") && spool say "got $a"`)
	hostileMust(t, err)
	eventually(t, 15*time.Second, 20*time.Millisecond, "the question of ha", func() bool {
		p, err := s.ReadProgress("ha")
		return err == nil && p.Question != nil
	})
	link("chats/ha/answer.json", out.file)

	// chats/<chat> itself is a link to a directory outside: `spool submit`
	// refuses in one line (the root does not let it through), and the
	// daemon must not make its lock there for a job queued by hand.
	link("chats/hc", out.sub)
	if job, stderr, err := submit("--chat", "hc", "--", "true"); err == nil || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("spool submit with chats/hc a link outside: %q, %v; want a one-line refusal", job, err)
	} else {
		t.Logf("spool submit with chats/hc a link outside: %s", strings.TrimSpace(stderr))
	}
	hc := "h-chat-link"
	hostileQueue(t, s, hc, "hc", []string{"true"}, nil)

	// Names of the job planted before its marker appears.
	hostileQueue(t, s, "h-log-link", "hl", []string{"true"}, func() { link("h-log-link.log", out.file) })
	hostileQueue(t, s, "h-log-dir", "hd", []string{"true"}, func() { hostileMust(t, os.Mkdir(s.Path("h-log-dir.log"), 0o750)) })
	hostileQueue(t, s, "h-ev-link", "he", []string{"spool", "say", "hello"}, func() { link("h-ev-link.events", out.file) })
	hostileQueue(t, s, "h-ev-fifo", "hf", []string{"spool", "say", "hello"}, func() { hostileMust(t, syscall.Mkfifo(s.Path("h-ev-fifo.events"), 0o640)) })
	// A spec that is a FIFO, a link outside, and 1 GB (sparse).
	hostileMust(t, syscall.Mkfifo(s.Path("h-spec-fifo.json"), 0o640))
	hostileMust(t, os.WriteFile(s.Path("h-spec-fifo.ready"), nil, 0o640))
	link("h-spec-link.json", out.file)
	hostileMust(t, os.WriteFile(s.Path("h-spec-link.ready"), nil, 0o640))
	big, err := os.Create(s.Path("h-spec-big.json"))
	hostileMust(t, err)
	hostileMust(t, big.Truncate(1<<30))
	big.Close()
	hostileMust(t, os.WriteFile(s.Path("h-spec-big.ready"), nil, 0o640))
	// A marker that is a link outside, and one that is a directory.
	hostileMust(t, os.WriteFile(s.Path("h-mark-link.json"), []byte(`{"chat":"hm","argv":["true"]}`), 0o640))
	link("h-mark-link.ready", out.file)
	hostileMust(t, os.WriteFile(s.Path("h-mark-dir.json"), []byte(`{"chat":"hm2","argv":["true"]}`), 0o640))
	hostileMust(t, os.Mkdir(s.Path("h-mark-dir.ready"), 0o750))

	// Now the answer, through the link's place.
	if o, err := command(raceEnv(), "spool", "--spool", dir, "answer", "--chat", "ha", "yes").CombinedOutput(); err != nil {
		t.Errorf("spool answer over a planted link: %v: %s", err, o)
	}

	// How each case ends.
	type want struct {
		job   string
		state spool.State
		why   string // in the result's error
	}
	for _, w := range []want{
		{hp, spool.Done, ""},
		{ha, spool.Done, ""},
		{hc, spool.Failed, "not a directory"},
		{"h-log-link", spool.Failed, "log"},
		{"h-log-dir", spool.Failed, "log"},
		{"h-ev-link", spool.Failed, "events"},
		{"h-ev-fifo", spool.Failed, "events"},
		{"h-spec-fifo", spool.Failed, "FIFO"},
		{"h-spec-link", spool.Failed, "symlink"},
		{"h-spec-big", spool.Failed, "too large"},
	} {
		r := waitEnd(t, s, w.job, 20*time.Second, 20*time.Millisecond)
		if r.State != w.state || (w.why != "" && !strings.Contains(relStr(r.Error), w.why)) {
			t.Errorf("job %s ended %s (%s); want %s saying %q", w.job, r.State, relStr(r.Error), w.state, w.why)
		} else {
			t.Logf("job %s: %s %s", w.job, r.State, relStr(r.Error))
		}
	}
	// The markers that are not files are moved aside, each with its reason.
	for _, name := range []string{"h-mark-link.ready", "h-mark-dir.ready"} {
		eventually(t, 10*time.Second, 20*time.Millisecond, name+" in corrupt/", func() bool {
			_, err := os.Lstat(filepath.Join(dir, spool.CorruptDir, name+".why"))
			return err == nil
		})
		why, _ := os.ReadFile(filepath.Join(dir, spool.CorruptDir, name+".why"))
		t.Logf("corrupt/%s.why: %s", name, bytes.TrimSpace(why))
		if _, err := os.Lstat(s.Path(name)); err == nil {
			t.Errorf("%s is still in the root", name)
		}
	}
	if b, _ := os.ReadFile(s.Path(hp + ".events")); !bytes.Contains(b, []byte(`"two"`)) {
		t.Errorf("job hp's events: %s", b)
	}
	// The run's last document, done, landed before its result.
	eventually(t, 5*time.Second, 20*time.Millisecond, "progress/hp to be the run's own last document", func() bool {
		p, err := s.ReadProgress("hp")
		return err == nil && p.Job == hp && p.Done
	})
	if b, _ := os.ReadFile(s.Path(ha + ".log")); len(b) > 0 {
		t.Logf("ha log: %s", b)
	}
	if !spoolEventsSay(s, ha, "got yes") {
		t.Errorf("job ha did not get the answer given after the planted link")
	}

	// The daemon is alive, and serves a plain job as before.
	if !d.alive() {
		t.Fatalf("spoold died in the hostile tree: %v", d.err)
	}
	last, _, err := submit("--chat", "plain", "--", "true")
	hostileMust(t, err)
	if r := waitEnd(t, s, last, 20*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Errorf("a plain job after the hostile ones: %s %s", r.State, relStr(r.Error))
	}
	out.check(t)
	d.stop(t, 20*time.Second)
	out.check(t)
	// Nothing of the file outside was read into the tree (a progress, a
	// result, an event, a log that copied it).
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if fi, ierr := e.Info(); err == nil && ierr == nil && fi.Mode().IsRegular() && fi.Size() < 1<<20 {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("the secret")) {
				t.Errorf("%s holds what the file outside the spool holds: %q", p, b)
			}
		}
		return nil
	})
}

func spoolEventsSay(s *spool.Spool, job, text string) bool {
	evs, _ := s.NewEventReader(job).Read()
	for _, ev := range evs {
		if strings.Contains(ev.Text, text) {
			return true
		}
	}
	return false
}

// TestHostileSubmit: `spool submit` over planted names: a directory at
// progress/<chat> is refused in one line and nothing is left; a link at
// chats/<chat>/answer.json is removed, its target untouched.
func TestHostileSubmit(t *testing.T) {
	dir := newSpool(t)
	out := hostileMakeOutside(t)
	s, err := spool.Create(dir)
	hostileMust(t, err)
	defer s.Close()
	hostileMust(t, os.Mkdir(s.Path("progress/pd"), 0o750))
	cmd := command(raceEnv(), "spool", "--spool", dir, "submit", "--chat", "pd", "--", "true")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err == nil {
		t.Errorf("spool submit over a directory at progress/pd succeeded: %s", o.String())
	} else if lines := strings.Split(strings.TrimSpace(e.String()), "\n"); len(lines) != 1 {
		t.Errorf("spool submit said %q; want one line", e.String())
	}
	jobs, other, _ := s.Scan()
	if len(jobs) != 0 {
		t.Errorf("a refused submit left %v", jobs)
	}
	for _, n := range other {
		if strings.HasPrefix(n, ".") {
			t.Errorf("a refused submit left the temporary %s", n)
		}
	}
	hostileMust(t, os.MkdirAll(s.Path("chats/pa"), 0o750))
	hostileMust(t, os.Symlink(out.file, s.Path("chats/pa/answer.json")))
	if o, err := command(raceEnv(), "spool", "--spool", dir, "submit", "--chat", "pa", "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("spool submit: %v: %s", err, o)
	}
	if _, err := os.Lstat(s.Path("chats/pa/answer.json")); err == nil {
		t.Errorf("spool submit left the link at chats/pa/answer.json")
	}
	out.check(t)
}

// TestModes: under umask 000 and 077, what spoold and the spool command
// make is 0750 (directories) and 0640 (documents), including progress/,
// chats/<chat>/answer.json, the lock, .events, .log and corrupt/.
func TestModes(t *testing.T) {
	for _, umask := range []string{"000", "077"} {
		t.Run("umask"+umask, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "spool") // made by spoold
			sh := func(name string, args ...string) *exec.Cmd {
				cmd := exec.Command("sh", append([]string{"-c", `umask "$0"; exec "$@"`, umask, bin(name)}, args...)...)
				cmd.Env = raceEnv()
				return cmd
			}
			logf, err := os.Create(filepath.Join(t.TempDir(), "spoold.log"))
			hostileMust(t, err)
			d := sh("spoold", "--spool", dir, "--lease", "2s", "--metrics-file", "off")
			d.Stdout, d.Stderr = logf, logf
			hostileMust(t, d.Start())
			defer func() { d.Process.Kill(); d.Wait() }()
			eventually(t, 10*time.Second, 20*time.Millisecond, "the tree", func() bool {
				_, err := os.Stat(filepath.Join(dir, spool.GateDir))
				return err == nil
			})
			s := openSpool(t, dir, 300)
			o, err := sh("spool", "--spool", dir, "submit", "--chat", "m", "--", "sh", "-c", `echo to the log; a=$(spool ask "ok?"); spool say "got $a"`).Output()
			hostileMust(t, err)
			job := strings.TrimSpace(string(o))
			eventually(t, 15*time.Second, 20*time.Millisecond, "the question", func() bool {
				p, err := s.ReadProgress("m")
				return err == nil && p.Question != nil
			})
			if o, err := sh("spool", "--spool", dir, "answer", "--chat", "m", "yes").CombinedOutput(); err != nil {
				t.Fatalf("spool answer: %v: %s", err, o)
			}
			waitEnd(t, s, job, 15*time.Second, 20*time.Millisecond)
			// Something for corrupt/: a marker that is a directory.
			hostileMust(t, os.WriteFile(s.Path("bad.json"), []byte(`{"chat":"b","argv":["true"]}`), 0o600))
			hostileMust(t, os.Mkdir(s.Path("bad.ready"), 0o700))
			eventually(t, 40*time.Second, 20*time.Millisecond, "corrupt/bad.ready.why", func() bool {
				_, err := os.Stat(filepath.Join(dir, spool.CorruptDir, "bad.ready.why"))
				return err == nil
			})
			seen := map[string]bool{}
			filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				if rel == "bad.json" || strings.HasPrefix(rel, "corrupt/bad.ready") && rel != "corrupt/bad.ready.why" {
					// Planted by the test with its own modes.
					if e.IsDir() && rel != "." {
						return fs.SkipDir
					}
					return nil
				}
				fi, _ := os.Lstat(p)
				want := spool.FileMode
				if fi.IsDir() {
					want = spool.DirMode
				}
				if fi.Mode().Perm() != want {
					t.Errorf("umask %s: %s has mode %o, want %o", umask, rel, fi.Mode().Perm(), want)
				}
				seen[rel] = true
				return nil
			})
			for _, n := range []string{".", "progress", "progress/m", "chats", "chats/m", "chats/m/answer.json", "chats/m/lock",
				"corrupt", "corrupt/bad.ready.why", "gate", job + ".json", job + ".done", job + ".events", job + ".log"} {
				if !seen[n] {
					t.Errorf("umask %s: %s was not made", umask, n)
				}
			}
		})
	}
}
