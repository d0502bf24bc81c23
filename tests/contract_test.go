package tests

// The writers' contract: one set of cases, as data
// (testdata/contract/submit.json), run against every writer of a job into
// the tree, so that the writers cannot drift apart. The writers are
// `spool submit` with flags, with --spec and with --batch, package
// spool's Submit, and the Python client's submit (clients/python), which
// writes the tree itself. A change to what a submit accepts, refuses or
// leaves behind is a change to the cases, and every writer then has to
// follow.
//
// Every case is run by every writer that can be given it, each on a spool
// of its own. A case that queues is checked as an operator would: the
// writer printed or returned the id; the tree holds the spec and an empty
// marker, both mode 0640 and the spool's owner's, and, where the spool has
// doorbell/, a new empty bell, and nothing else new (no temporary, no
// directory); the spec reads back with the fields the
// case names; the chat's progress and answer named by the case are gone,
// removed after the spec appeared and before the marker did (inotify's
// own account of the directories); and nothing else of the tree, or
// outside it, changed. A case that is refused is checked the same way
// for nothing changed, and for how each writer says it: one line, that
// matches the case's "says"; `spool submit` exits 2 and prints only on
// stderr; the Python client raises InvalidID for an id, SpoolError for
// anything else, never another exception; package spool's error wraps
// the sentinel of its kind.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vmspool/vmspool/internal/powerfs"
	"github.com/vmspool/vmspool/spool"
)

// contractCase is one case of testdata/contract/submit.json.
type contractCase struct {
	Name string `json:"name"`
	// Tree is made in the spool first: a name and its content, a name
	// ending in "/" a directory, a content "-> TARGET" a symlink,
	// "|fifo" a FIFO. Beside the spool are "outside" (a file) and
	// "outside-dir/" (holding "c" and "answer.json"), for links to lead to.
	Tree map[string]string `json:"tree"`
	// Spool is what the spool's path is: "" the directory, "symlink" a
	// symlink to it, "file", "symlink-to-file", "missing", "dangling".
	Spool string `json:"spool"`
	// Env is the free-space floor's environment; any of the three not
	// named is "0" (off), so that the cases do not depend on the disk.
	Env map[string]string `json:"env"`
	// Owner, "UID:GID", is whose the spool is (chowned; root only).
	Owner string `json:"owner"`
	// Needs "inodes": the spool's filesystem reports its inodes.
	Needs string `json:"needs"`
	// Spec is what is submitted, as a spec document's fields (one line;
	// doc is it decoded).
	Spec json.RawMessage `json:"spec"`
	doc  map[string]any
	// OK, if set, says the job is queued: Spec holds fields the spec
	// reads back with (null: absent) beyond those it was given, Gone the
	// names the submit removes.
	OK *struct {
		Spec map[string]json.RawMessage `json:"spec"`
		Gone []string                   `json:"gone"`
	} `json:"ok"`
	// Error is the kind of refusal (contractKinds), Says a regexp its
	// one-line message matches whichever writer says it.
	Error string `json:"error"`
	Says  string `json:"says"`
}

// contractKinds are the refusals: the Python client's exception, and the
// sentinel package spool's error wraps (nil: none). `spool submit` exits
// 2 for each: every refusal of a submit is bad input (docs/spool-format.md).
var contractKinds = map[string]struct {
	python string
	is     error
}{
	"invalid-id": {"InvalidID", spool.ErrInvalidID},
	"floor":      {"SpoolError", spool.ErrBelowFloor},
	"no-spool":   {"SpoolError", spool.ErrNoSpool},
	"refused":    {"SpoolError", nil},
}

// loadContract reads the cases. A string may hold {{C*N}}: the character
// C, N times (an id of 129 characters, a spec of 4 MiB).
func loadContract(t *testing.T) []contractCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "contract", "submit.json"))
	if err != nil {
		t.Fatal(err)
	}
	b = regexp.MustCompile(`\{\{(.)\*([0-9]+)\}\}`).ReplaceAllFunc(b, func(m []byte) []byte {
		n, _ := strconv.Atoi(string(m[4 : len(m)-2]))
		return bytes.Repeat(m[2:3], n)
	})
	var f struct {
		About string         `json:"about"`
		Cases []contractCase `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("testdata/contract/submit.json: %v", err)
	}
	seen := map[string]bool{}
	for _, c := range f.Cases {
		_, kind := contractKinds[c.Error]
		switch {
		case seen[c.Name]:
			t.Fatalf("case %q: twice", c.Name)
		case (c.OK == nil) == (c.Error == ""):
			t.Fatalf("case %q: give exactly one of \"ok\" and \"error\"", c.Name)
		case c.Error != "" && (!kind || c.Says == ""):
			t.Fatalf("case %q: an error is one of %v, with \"says\"", c.Name, slices.Sorted(maps.Keys(contractKinds)))
		}
		seen[c.Name] = true
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.Spec); err != nil {
			t.Fatalf("case %q: spec: %v", c.Name, err)
		}
		c.Spec = compact.Bytes()
		if err := json.Unmarshal(c.Spec, &c.doc); err != nil {
			t.Fatalf("case %q: spec: %v", c.Name, err)
		}
	}
	return f.Cases
}

// contractOutcome is what one writer did with one case.
type contractOutcome struct {
	skip   string // why this writer cannot be given the case
	id     string // the job it queued
	failed bool
	msg    string // its one-line error
	check  func(t *testing.T, kind string)
	what   string // how it was called, for a failure's report
}

// contractRun is one case given to one writer: the spool, where it is,
// and the case's document decoded.
type contractRun struct {
	c     *contractCase
	dir   string // the spool's real directory
	path  string // the spool's path as the writer is given it
	work  string // the writer's working directory, beside the spool
	env   map[string]string
	doc   map[string]any
	getpy func() *pyWriter
}

// contractWriters are the writers, each given the case's document in its
// own form.
var contractWriters = []struct {
	name   string
	submit func(t *testing.T, r *contractRun) contractOutcome
}{
	{"flags", submitFlags},
	{"spec", func(t *testing.T, r *contractRun) contractOutcome { return submitStdin(t, r, "--spec") }},
	{"batch", func(t *testing.T, r *contractRun) contractOutcome { return submitStdin(t, r, "--batch") }},
	{"go", submitPackage},
	{"python", submitPython},
}

// TestContract runs every case by every writer. The cases run in
// parallel (each has spools of its own; the Python writer takes one
// request at a time).
func TestContract(t *testing.T) {
	cases := loadContract(t)
	getpy := pyWriterOnce(t)
	for i := range cases {
		c := &cases[i]
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			for _, w := range contractWriters {
				t.Run(w.name, func(t *testing.T) {
					runContractCase(t, c, w.submit, getpy)
				})
			}
		})
	}
}

func runContractCase(t *testing.T, c *contractCase, submit func(*testing.T, *contractRun) contractOutcome, getpy func() *pyWriter) {
	if c.Owner != "" && os.Geteuid() != 0 {
		t.Skip("skipped: needs root, to submit into a spool another user owns (CI runs as root)")
	}
	top := t.TempDir()
	r := &contractRun{c: c, dir: filepath.Join(top, "spool"), work: filepath.Join(top, "work"), getpy: getpy,
		env: map[string]string{"SPOOL_MIN_FREE": "0", "SPOOL_MIN_FREE_PERCENT": "0", "SPOOL_MIN_FREE_INODES": "0"}}
	for k, v := range c.Env {
		r.env[k] = v
	}
	r.doc = c.doc
	makeContractTree(t, r, top)
	if c.Needs == "inodes" {
		var st unix.Statfs_t
		if err := unix.Statfs(r.dir, &st); err != nil || st.Files == 0 {
			t.Skip("skipped: the spool's filesystem reports no inodes, and a floor of inodes judges nothing there")
		}
	}
	before := snapshotTree(t, top)
	watch := watchSubmit(t, r)
	out := submit(t, r)
	if out.skip != "" {
		t.Skip("skipped: " + out.skip)
	}
	events := watch()
	after := snapshotTree(t, top)
	if c.OK != nil {
		if out.failed {
			t.Fatalf("%s: refused, want queued: %s", out.what, out.msg)
		}
		checkQueued(t, r, out, before, after, events)
		return
	}
	if !out.failed {
		t.Fatalf("%s: queued %s, want refused (%s: %s)", out.what, out.id, c.Error, c.Says)
	}
	if strings.Contains(out.msg, "\n") || out.msg == "" {
		t.Errorf("%s: the error is not one line: %q", out.what, out.msg)
	}
	if !regexp.MustCompile(c.Says).MatchString(out.msg) {
		t.Errorf("%s: says %q, want it to match %q", out.what, out.msg, c.Says)
	}
	out.check(t, c.Error)
	diffTrees(t, "refused: nothing may change", before, after)
}

// checkQueued checks a queued job as an operator would see it.
func checkQueued(t *testing.T, r *contractRun, out contractOutcome, before, after map[string]treeEntry, events []inotifyEvent) {
	t.Helper()
	id := out.id
	if want, ok := r.doc["id"].(string); ok && want != "" {
		if id != want {
			t.Fatalf("%s: queued %q, want the id %q", out.what, id, want)
		}
	} else if len(id) != 26 || !spool.ValidID(id) {
		t.Fatalf("%s: queued %q, want a fresh ULID", out.what, id)
	}
	// The tree: the spec and the marker are new, the names gone are gone,
	// and nothing else changed.
	rel := func(n string) string { r, _ := filepath.Rel(filepath.Dir(r.dir), filepath.Join(r.dir, n)); return r }
	want := maps.Clone(before)
	for _, g := range r.c.OK.Gone {
		if _, ok := want[rel(g)]; !ok {
			t.Fatalf("the case says %s is gone, but the tree did not have it", g)
		}
		delete(want, rel(g))
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if r.c.Owner != "" {
		fmt.Sscanf(r.c.Owner, "%d:%d", &uid, &gid)
	}
	for _, n := range []string{id + spool.ExtSpec, id + spool.ExtReady} {
		e, ok := after[rel(n)]
		if !ok {
			t.Fatalf("%s: no %s in the tree", out.what, n)
		}
		if e.kind != "file" || e.perm != 0o640 || e.uid != uid || e.gid != gid {
			t.Errorf("%s: %s is %s %o %d:%d, want a file 0640 %d:%d", out.what, n, e.kind, e.perm, e.uid, e.gid, uid, gid)
		}
		want[rel(n)] = e
	}
	if after[rel(id+spool.ExtReady)].data != "" {
		t.Errorf("%s: the marker is not empty: %q", out.what, after[rel(id+spool.ExtReady)].data)
	}
	// A spool with doorbell/ is rung for: an empty doorbell/<id>, new
	// (docs/spool-format.md, "The doorbell").
	if d, ok := before[rel(spool.DoorbellDir)]; ok && d.kind == "dir" {
		bell := rel(spool.DoorbellDir + "/" + id)
		e, ok := after[bell]
		if !ok || e.kind != "file" || e.data != "" {
			t.Errorf("%s: no bell at %s (%+v)", out.what, bell, e)
		}
		want[bell] = e
	}
	diffTrees(t, "queued", want, after)

	// The spec reads back with what was asked.
	s, err := spool.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.State(id); err != nil || st != spool.Queued {
		t.Errorf("%s: job %s is %q (%v), want queued", out.what, id, st, err)
	}
	sp, err := s.ReadSpec(id)
	if err != nil {
		t.Fatalf("%s: the spec does not read back: %v", out.what, err)
	}
	got := specFields(sp)
	expect := map[string]json.RawMessage{}
	for _, k := range []string{"chat", "argv", "script", "env", "cwd"} {
		if v, ok := r.doc[k]; ok {
			expect[k], _ = json.Marshal(v)
		}
	}
	for _, k := range []string{"timeout", "attempts"} {
		if _, ok := r.doc[k]; ok {
			if _, said := r.c.OK.Spec[k]; !said {
				t.Fatalf("the case gives %q: say in ok.spec what it reads back as", k)
			}
		}
	}
	for k, v := range r.c.OK.Spec {
		expect[k] = v
	}
	if cwd, ok := r.doc["cwd"].(string); ok && out.what == "flags" && cwd != "" && !filepath.IsAbs(cwd) {
		// --cwd is relative to the caller (docs/spool-format.md).
		expect["cwd"], _ = json.Marshal(filepath.Join(r.work, cwd))
	}
	for k, v := range expect {
		g, has := got[k]
		switch {
		case string(v) == "null" && has:
			t.Errorf("%s: the spec has %q: %s, want none", out.what, k, g)
		case string(v) != "null" && !jsonEqual(g, v):
			t.Errorf("%s: the spec's %q is %s, want %s", out.what, k, clip(string(g)), clip(string(v)))
		}
	}

	// The order, as the kernel saw it: the spec, then the chat's progress
	// and answer removed, then the marker (invariants 2 and 6).
	pos := func(op, name string) int {
		return slices.IndexFunc(events, func(e inotifyEvent) bool {
			return e.name == name && (op == "in" && (e.op == "moved_to" || e.op == "create") || op == e.op)
		})
	}
	spec, marker := pos("in", id+spool.ExtSpec), pos("in", id+spool.ExtReady)
	if spec < 0 || marker < spec {
		t.Errorf("%s: the spec (%d) did not appear before the marker (%d): %v", out.what, spec, marker, events)
	}
	for _, g := range r.c.OK.Gone {
		if p := pos("delete", g); p < spec || p > marker {
			t.Errorf("%s: %s removed at %d, want between the spec's arrival (%d) and the marker's (%d): %v", out.what, g, p, spec, marker, events)
		}
	}
	for _, e := range events {
		if e.op == "create" && !strings.HasPrefix(filepath.Base(e.name), ".") && e.name != id+spool.ExtSpec {
			t.Errorf("%s: %s was created in place, not renamed from a temporary: %v", out.what, e.name, events)
		}
	}
}

// specFields are the spec's fields as its document holds them, each
// marshalled alone (an empty one is absent, as in the document).
func specFields(sp *spool.Spec) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range map[string]any{"id": sp.ID, "chat": sp.Chat, "argv": sp.Argv, "script": sp.Script,
		"cwd": sp.Cwd, "env": sp.Env, "timeout": sp.Timeout, "attempts": sp.Attempts} {
		if rv := reflect.ValueOf(v); !rv.IsZero() {
			out[k], _ = json.Marshal(v)
		}
	}
	return out
}

// jsonEqual says whether a and b are one JSON value. The bytes are
// compared first: both are Go's json.Marshal, and decoding a 4 MiB spec
// twice costs seconds under the race detector.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// --- the writers ------------------------------------------------------------

// contractCmd runs spool as an operator would, with the process's umask
// 077: the tree's modes are the tree's, whatever the umask.
func contractCmd(r *contractRun, args ...string) *exec.Cmd {
	cmd := exec.Command("sh", append([]string{"-c", `umask 077 && exec "$@"`, "sh", bin("spool"), "--spool", r.path, "submit"}, args...)...)
	cmd.Dir = r.work
	cmd.Env = raceEnv()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

func runContractCmd(t *testing.T, cmd *exec.Cmd, what string) contractOutcome {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := exitCode(err)
	if code < 0 {
		t.Fatalf("%s: %v", what, err)
	}
	if code == 0 {
		if stderr.Len() > 0 {
			t.Errorf("%s: queued, and said on stderr: %s", what, stderr.String())
		}
		if !strings.HasSuffix(stdout.String(), "\n") || strings.Count(stdout.String(), "\n") != 1 {
			t.Errorf("%s: printed %q, want the id and a newline", what, stdout.String())
		}
		return contractOutcome{id: strings.TrimSuffix(stdout.String(), "\n"), what: what}
	}
	msg := strings.TrimSuffix(stderr.String(), "\n")
	return contractOutcome{failed: true, msg: msg, what: what, check: func(t *testing.T, kind string) {
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (bad input)", what, code)
		}
		if stdout.Len() > 0 {
			t.Errorf("%s: refused, and printed %q", what, stdout.String())
		}
		if !strings.HasPrefix(msg, "spool submit: ") {
			t.Errorf("%s: the error %q does not name the command", what, msg)
		}
	}}
}

// submitFlags gives the case to `spool submit --chat C ... -- ARGV`, where
// flags can say it.
func submitFlags(t *testing.T, r *contractRun) contractOutcome {
	var args []string
	var stdin string
	str := func(v any) (string, bool) { s, ok := v.(string); return s, ok && !strings.Contains(s, "\x00") }
	for _, k := range slices.Sorted(maps.Keys(r.doc)) {
		v := r.doc[k]
		switch k {
		case "chat", "id", "cwd":
			s, ok := str(v)
			if !ok {
				return contractOutcome{skip: fmt.Sprintf("no flag says %q: %v", k, v)}
			}
			args = append(args, "--"+k, s)
		case "timeout":
			switch v := v.(type) {
			case string:
				if v != "" {
					args = append(args, "--timeout", v)
				}
			case float64:
				args = append(args, "--timeout", strconv.FormatFloat(v, 'f', -1, 64))
			default:
				return contractOutcome{skip: fmt.Sprintf("no flag says a timeout of %v", v)}
			}
		case "attempts":
			f, ok := v.(float64)
			if !ok || f != math.Trunc(f) {
				return contractOutcome{skip: fmt.Sprintf("no flag says attempts of %v", v)}
			}
			args = append(args, "--attempts", strconv.FormatFloat(f, 'f', -1, 64))
		case "env":
			m, ok := v.(map[string]any)
			if !ok {
				return contractOutcome{skip: "no flag says an env that is not an object"}
			}
			for _, name := range slices.Sorted(maps.Keys(m)) {
				val, ok := str(m[name])
				if _, nameOK := str(name); !ok || !nameOK || strings.Contains(name, "=") {
					return contractOutcome{skip: fmt.Sprintf("--env cannot say %q: %v", name, m[name])}
				}
				args = append(args, "--env", name+"="+val)
			}
		case "script":
			s, ok := v.(string)
			if !ok {
				return contractOutcome{skip: "no flag says a script that is not text"}
			}
			args, stdin = append(args, "--script", "-"), s
		case "argv":
		default:
			return contractOutcome{skip: fmt.Sprintf("no flag says %q", k)}
		}
	}
	if v, ok := r.doc["argv"]; ok {
		list, ok := v.([]any)
		if !ok {
			return contractOutcome{skip: "no flag says an argv that is not a list"}
		}
		args = append(args, "--")
		for _, a := range list {
			s, ok := str(a)
			if !ok {
				return contractOutcome{skip: fmt.Sprintf("an argument cannot be %q", a)}
			}
			args = append(args, s)
		}
		if n := len(strings.Join(args, " ")); n > 100<<10 {
			return contractOutcome{skip: fmt.Sprintf("an argv of %d bytes is more than exec(2) passes", n)}
		}
	}
	cmd := contractCmd(r, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return runContractCmd(t, cmd, "flags")
}

// submitStdin gives the case's document to `spool submit --spec -` or
// `--batch -` (one line).
func submitStdin(t *testing.T, r *contractRun, flag string) contractOutcome {
	cmd := contractCmd(r, flag, "-")
	cmd.Stdin = bytes.NewReader(append(slices.Clip(r.c.Spec), '\n'))
	return runContractCmd(t, cmd, strings.TrimPrefix(flag, "--"))
}

// submitPackage gives the case to package spool, as a Go program that
// holds a spec would: the document decoded into a Spec, the floor of the
// environment, Submit.
func submitPackage(t *testing.T, r *contractRun) contractOutcome {
	fail := func(err error) contractOutcome {
		return contractOutcome{failed: true, msg: err.Error(), what: "go", check: func(t *testing.T, kind string) {
			if is := contractKinds[kind].is; is != nil && !errors.Is(err, is) {
				t.Errorf("go: %v: want an error that wraps %v", err, is)
			}
		}}
	}
	var sp spool.Spec
	if err := json.Unmarshal(r.c.Spec, &sp); err != nil {
		return fail(err)
	}
	floor, err := spool.FloorFromEnv(func(k string) string { return r.env[k] })
	if err != nil {
		return fail(err)
	}
	s, err := spool.Open(r.path)
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	s.Floor = floor
	id, err := s.Submit(&sp)
	if err != nil {
		return fail(err)
	}
	return contractOutcome{id: id, what: "go"}
}

// pyWriter is the Python client as a writer, in one process for all the
// cases (testdata/contract/python.py): a request a line in, an answer a
// line out.
type pyWriter struct {
	cmd  *exec.Cmd
	in   *bufio.Writer
	out  *bufio.Reader
	skip string // why there is none
	err  error  // why it did not start
	mu   sync.Mutex
}

// pyWriterOnce returns a function that starts the Python writer the first
// time it is called; the writer is stopped when t ends.
func pyWriterOnce(t *testing.T) func() *pyWriter {
	var once sync.Once
	var py *pyWriter
	t.Cleanup(func() {
		if py != nil {
			py.close()
		}
	})
	return func() *pyWriter {
		once.Do(func() { py = startPyWriter() })
		return py
	}
}

func startPyWriter() *pyWriter {
	py, err := exec.LookPath("python3")
	if err != nil {
		return &pyWriter{skip: "no python3 here; the Python client's tests say so too"}
	}
	client, _ := filepath.Abs(filepath.Join("..", "clients", "python"))
	cmd := exec.Command("sh", "-c", `umask 077 && exec "$@"`, "sh", py, filepath.Join("testdata", "contract", "python.py"), client)
	cmd.Env = raceEnv()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return &pyWriter{err: err}
	}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return &pyWriter{err: err}
	}
	return &pyWriter{cmd: cmd, in: bufio.NewWriter(in), out: bufio.NewReaderSize(out, 1<<20)}
}

func (p *pyWriter) close() {
	if p.cmd != nil {
		p.in.Flush()
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

func submitPython(t *testing.T, r *contractRun) contractOutcome {
	p := r.getpy()
	if p.skip != "" {
		return contractOutcome{skip: p.skip}
	}
	if p.err != nil {
		t.Fatalf("python: %v", p.err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	head, _ := json.Marshal(map[string]any{"spool": r.path, "env": r.env})
	// The spec as it is: a marshal would scan all of a 4 MiB one again.
	p.in.Write(head[:len(head)-1])
	p.in.WriteString(`,"spec":`)
	p.in.Write(r.c.Spec)
	p.in.WriteString("}\n")
	if err := p.in.Flush(); err != nil {
		t.Fatalf("python: %v", err)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("python: the writer died: %v", err)
	}
	var ans struct{ ID, Error, Message, Skip string }
	if err := json.Unmarshal(line, &ans); err != nil {
		t.Fatalf("python: %v: %s", err, line)
	}
	switch {
	case ans.Skip != "":
		return contractOutcome{skip: ans.Skip}
	case ans.Error == "":
		return contractOutcome{id: ans.ID, what: "python"}
	}
	return contractOutcome{failed: true, msg: ans.Message, what: "python", check: func(t *testing.T, kind string) {
		if want := contractKinds[kind].python; ans.Error != want {
			t.Errorf("python: raised %s(%q), want %s", ans.Error, ans.Message, want)
		}
	}}
}

// --- the tree -----------------------------------------------------------------

// makeContractTree makes the spool, what the case puts in it, and what
// beside it links may lead to.
func makeContractTree(t *testing.T, r *contractRun, top string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{r.dir, r.work, filepath.Join(top, "outside-dir")} {
		must(os.Mkdir(d, 0o750))
	}
	must(os.WriteFile(filepath.Join(top, "outside"), []byte("outside\n"), 0o640))
	must(os.WriteFile(filepath.Join(top, "outside-dir", "c"), []byte("outside c\n"), 0o640))
	must(os.WriteFile(filepath.Join(top, "outside-dir", "answer.json"), []byte(`{"answer":"outside"}`), 0o640))
	for _, name := range slices.Sorted(maps.Keys(r.c.Tree)) {
		content, p := r.c.Tree[name], filepath.Join(r.dir, name)
		must(os.MkdirAll(filepath.Dir(p), 0o750))
		switch {
		case strings.HasSuffix(name, "/"):
			must(os.MkdirAll(p, 0o750))
		case strings.HasPrefix(content, "-> "):
			must(os.Symlink(strings.TrimPrefix(content, "-> "), p))
		case content == "|fifo":
			must(unix.Mkfifo(p, 0o640))
		default:
			must(os.WriteFile(p, []byte(content), 0o640))
		}
	}
	if r.c.Owner != "" {
		var uid, gid int
		if _, err := fmt.Sscanf(r.c.Owner, "%d:%d", &uid, &gid); err != nil {
			t.Fatalf("owner %q: want UID:GID", r.c.Owner)
		}
		must(os.Chown(r.dir, uid, gid))
	}
	r.path = r.dir
	switch r.c.Spool {
	case "":
	case "symlink":
		r.path = filepath.Join(top, "link")
		must(os.Symlink("spool", r.path))
	case "file", "symlink-to-file":
		r.path = filepath.Join(top, "afile")
		must(os.WriteFile(r.path, nil, 0o640))
		if r.c.Spool == "symlink-to-file" {
			r.path = filepath.Join(top, "flink")
			must(os.Symlink("afile", r.path))
		}
	case "missing":
		r.path = filepath.Join(top, "nope")
	case "dangling":
		r.path = filepath.Join(top, "dangle")
		must(os.Symlink("nope", r.path))
	default:
		t.Fatalf("spool %q: want symlink, file, symlink-to-file, missing or dangling", r.c.Spool)
	}
}

// treeEntry is a name of the tree as ls -l and cat show it.
type treeEntry struct {
	kind     string // file, dir, symlink, fifo
	perm     fs.FileMode
	uid, gid int
	data     string // a file's content, a symlink's target
	mtime    int64  // a file's
}

// snapshotTree reads every name under top, never through a link.
func snapshotTree(t *testing.T, top string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == top {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := treeEntry{perm: fi.Mode().Perm(), uid: int(st.Uid), gid: int(st.Gid)}
		switch m := fi.Mode(); {
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.kind, e.data, e.mtime = "file", string(b), fi.ModTime().UnixNano()
		case m.IsDir():
			e.kind = "dir"
		case m&fs.ModeSymlink != 0:
			e.kind = "symlink"
			e.data, _ = os.Readlink(p)
		case m&fs.ModeNamedPipe != 0:
			e.kind = "fifo"
		default:
			e.kind = m.Type().String()
		}
		rel, _ := filepath.Rel(top, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffTrees reports every name that differs between want and got.
func diffTrees(t *testing.T, what string, want, got map[string]treeEntry) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		w, wok := want[n]
		g, gok := got[n]
		switch {
		case !gok:
			t.Errorf("%s: %s is gone", what, n)
		case !wok:
			t.Errorf("%s: %s is new (%s %q)", what, n, g.kind, clip(g.data))
		case w != g:
			t.Errorf("%s: %s changed: %+v, was %+v", what, n, g, w)
		}
	}
}

// --- inotify: the kernel's account of the submit --------------------------------

type inotifyEvent struct {
	op   string // create, delete, moved_to, moved_from
	name string // slash-separated, relative to the spool
}

// watchSubmit watches the spool, progress/ and chats/<chat>/ (those that
// are directories) and returns a function that stops and says what
// happened in them, in order.
func watchSubmit(t *testing.T, r *contractRun) func() []inotifyEvent {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[int]string{}
	add := func(rel string) {
		fi, err := os.Lstat(filepath.Join(r.dir, rel))
		if err != nil || !fi.IsDir() {
			return
		}
		wd, err := unix.InotifyAddWatch(fd, filepath.Join(r.dir, rel), unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM)
		if err != nil {
			t.Fatal(err)
		}
		dirs[wd] = rel
	}
	add(".")
	add(spool.ProgressDir)
	if chat, ok := r.doc["chat"].(string); ok && spool.ValidID(chat) {
		add(spool.ChatsDir + "/" + chat)
	}
	return func() []inotifyEvent {
		defer unix.Close(fd)
		var out []inotifyEvent
		buf := make([]byte, 1<<16)
		for {
			n, err := unix.Read(fd, buf)
			if err == unix.EAGAIN || n <= 0 {
				return out
			}
			for i := 0; i+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[i]))
				name := string(bytes.TrimRight(buf[i+unix.SizeofInotifyEvent:i+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
				i += unix.SizeofInotifyEvent + int(ev.Len)
				if d := dirs[int(ev.Wd)]; d != "." {
					name = d + "/" + name
				}
				for bit, op := range map[uint32]string{unix.IN_CREATE: "create", unix.IN_DELETE: "delete", unix.IN_MOVED_TO: "moved_to", unix.IN_MOVED_FROM: "moved_from"} {
					if ev.Mask&bit != 0 {
						out = append(out, inotifyEvent{op: op, name: name})
					}
				}
			}
		}
	}
}

// TestContractDurable: a job whose submit returned is durable, whichever
// writer queued it. The spool is on powerfs (internal/powerfs), which
// keeps only what was fsync'd; after each writer's submit the disk's
// view must hold its spec, whole, and its marker. The power-loss sweep
// (powerloss_test.go) cuts the power inside submits too.
func TestContractDurable(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	if err := syscall.Mount("tmpfs", backing, "tmpfs", 0, "size=64m,mode=0755"); err != nil {
		t.Skipf("skipped: needs root to mount a tmpfs and FUSE: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(backing, syscall.MNT_DETACH) })
	if err := os.Mkdir(filepath.Join(backing, "spool"), 0o750); err != nil {
		t.Fatal(err)
	}
	pfs, err := powerfs.Mount(backing, mnt, 0)
	if errors.Is(err, powerfs.ErrUnsupported) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pfs.Unmount() })
	getpy := pyWriterOnce(t)
	c := &contractCase{Spec: json.RawMessage(`{"chat":"c","argv":["echo","durable"],"timeout":"45m"}`)}
	r := &contractRun{c: c, dir: filepath.Join(mnt, "spool"), path: filepath.Join(mnt, "spool"), work: t.TempDir(),
		env:   map[string]string{"SPOOL_MIN_FREE": "0", "SPOOL_MIN_FREE_PERCENT": "0", "SPOOL_MIN_FREE_INODES": "0"},
		getpy: getpy}
	json.Unmarshal(c.Spec, &r.doc)
	c.doc = r.doc
	queued := map[string]string{}
	for _, w := range contractWriters {
		out := w.submit(t, r)
		switch {
		case out.skip != "":
			t.Logf("%s: skipped: %s", w.name, out.skip)
		case out.failed:
			t.Fatalf("%s: %s", w.name, out.msg)
		default:
			queued[out.id] = w.name
		}
	}
	disk := filepath.Join(t.TempDir(), "disk")
	if err := pfs.Rebuild(disk); err != nil {
		t.Fatal(err)
	}
	s, err := spool.Open(filepath.Join(disk, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, w := range queued {
		if st, err := s.State(id); err != nil || st != spool.Queued {
			t.Errorf("%s: after the power went, job %s is %q (%v), want queued", w, id, st, err)
		}
		if sp, err := s.ReadSpec(id); err != nil || sp.Argv[1] != "durable" {
			t.Errorf("%s: after the power went, the spec of %s: %v", w, id, err)
		}
	}
}
