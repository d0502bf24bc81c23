package tests

// Many hosts on one machine: each host is its own set of Linux namespaces
// (pid, mount, uts: its own hostname, its own pids, its own mounts) on a
// network namespace of its own, and mounts the same volume through its own
// link to the file servers, which run in another namespace: so that pids,
// flocks (where the engine does not share them) and inotify do not cross
// hosts, and the network between one host and the data can be cut or made
// lossy. The engines (sshfs, GlusterFS, CephFS) are set up and torn down
// by scripts/engines/ENGINE.sh, which an operator can run as well. The
// tests skip, saying why, where an engine cannot start (not root, no
// /dev/fuse, a package missing: `make test-deps` installs them).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
	"golang.org/x/sys/unix"
)

// mhEngines are the engines the many-hosts proof runs on.
var mhEngines = []string{"sshfs", "gluster", "ceph"}

// mhEngineMu keeps the engines one at a time: they share the namespaces'
// names.
var mhEngineMu sync.Mutex

// mhCluster is an engine's file servers, set up by its script, and the
// hosts that mount its volume.
type mhCluster struct {
	t      testing.TB
	engine string
	script string
	dir    string
	export string // the file server's side of the volume (the admin mount)
	spool  string // export/spool
	runs   string // the jobs' record, on the local disk outside the spool
	// serveWithin is how long a spoold may take to serve (90 s unset).
	serveWithin time.Duration
}

// mhRecommended are the sshfs options docs/operations.md recommends: no
// directory cache in sshfs, and the kernel's name and attribute caches
// short, so that a marker made elsewhere is seen at the next poll.
// scripts/engines/sshfs.sh mounts with them unless told otherwise.
const mhRecommended = "dir_cache=no,entry_timeout=0.2,attr_timeout=0.2"

// mhStart brings the engine up (its script's `up`, which first clears
// whatever an earlier run left) and makes a spool on it; the engine goes
// down when the test ends.
func mhStart(t testing.TB, engine string) *mhCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: many hosts need root (namespaces, FUSE mounts)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: no /dev/fuse: %v", err)
	}
	for _, p := range []string{"unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("skipped: no %s (util-linux, iproute2): %v", p, err)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "scripts", "engines", engine+".sh"))
	if err != nil {
		t.Fatal(err)
	}
	mhEngineMu.Lock()
	t.Cleanup(mhEngineMu.Unlock)
	c := &mhCluster{t: t, engine: engine, script: script, dir: t.TempDir()}
	c.runs = filepath.Join(c.dir, "runs.log")
	began := time.Now()
	out, err := c.run(3*time.Minute, "up")
	t.Cleanup(func() {
		if out, err := c.run(2*time.Minute, "down"); err != nil {
			t.Errorf("%s down: %v: %s", engine, err, out)
		}
	})
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			t.Skipf("skipped: %s", strings.TrimSpace(out))
		}
		t.Skipf("skipped: %s does not start: %v: %s", engine, err, mhTail(out, 2000))
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "admin="); ok {
			c.export = v
		}
	}
	if c.export == "" {
		t.Fatalf("%s up said no admin=: %s", engine, out)
	}
	t.Logf("%s up in %v", engine, time.Since(began).Round(100*time.Millisecond))
	c.spool = filepath.Join(c.export, "spool")
	s, err := spool.Create(c.spool)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return c
}

// run runs the engine's script with args, within limit.
func (c *mhCluster) run(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fault cuts a slot's link (partition), makes it lossy (loss PCT) or heals
// it.
func (c *mhCluster) fault(slot string, what ...string) {
	c.t.Helper()
	if out, err := c.run(30*time.Second, append([]string{"fault", slot}, what...)...); err != nil {
		c.t.Fatalf("%s fault %s %v: %v: %s", c.engine, slot, what, err, out)
	}
}

func mhTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// mhHost is one host: pid, mount and uts namespaces on a slot's network
// namespace, with the volume mounted, running one command.
type mhHost struct {
	c               *mhCluster
	name, slot, mnt string
	p               *proc
	spool           string   // the host's view of the spool
	pidNS           string   // the namespace's id, to find its processes
	fuse            []string // its FUSE connections (major:minor), to abort if it hangs
}

// host starts the host name on slot (h1, h2, h3) with env added to its
// environment (VMSP_FAKETIME runs its FUSE client under libfaketime), and
// runs argv there once the volume is mounted, with SPOOL (the host's view
// of the spool) and RUNS in its environment.
func (c *mhCluster) host(name, slot string, env []string, argv ...string) *mhHost {
	t := c.t
	t.Helper()
	h := &mhHost{c: c, name: name, slot: slot, mnt: filepath.Join(c.dir, "mnt-"+name)}
	h.spool = filepath.Join(h.mnt, "spool")
	e := append(raceEnv(), "VMSP_HOSTNAME="+name, "SPOOL="+h.spool, "RUNS="+c.runs,
		"PATH="+binDir+":"+os.Getenv("PATH"))
	h.p = startPath(t, append(e, env...), name, c.script, append([]string{"host", slot, h.mnt, "--"}, argv...)...)
	eventually(t, 60*time.Second, 20*time.Millisecond, "host "+name+" to mount the volume", func() bool {
		return strings.Contains(h.p.logText(), "host "+name+": mounted") || !h.p.alive()
	})
	if !h.p.alive() {
		t.Fatalf("host %s did not start: %s", name, h.p.logText())
	}
	if init := h.init(); init > 0 {
		h.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
		h.fuse = mhPrivateFUSE(init)
	}
	// Before the process's own cleanup (whose SIGTERM the host's first
	// process ignores): the host is killed, and if it hangs in its cut-off
	// mount, freed by aborting its FUSE connections.
	t.Cleanup(h.kill)
	return h
}

// spooldHost starts a host that runs spoold on its view of the spool.
func (c *mhCluster) spooldHost(name, slot string, env []string, args ...string) *mhHost {
	h := c.host(name, slot, env, append([]string{"sh", "-c", `exec spoold --spool "$SPOOL" --host "$VMSP_HOSTNAME" "$@"`, "spoold"}, args...)...)
	// CephFS holds what a crashed or cut-off client had for its session's
	// timeout (30 s at the least): a start may wait that long.
	within := c.serveWithin
	if within == 0 {
		within = 90 * time.Second
	}
	eventually(c.t, within, 20*time.Millisecond, "spoold on "+name+" to serve", func() bool {
		return strings.Contains(h.p.logText(), `"serving"`) || !h.p.alive()
	})
	if !h.p.alive() {
		c.t.Fatalf("spoold on %s did not start: %s", name, h.p.logText())
	}
	return h
}

// init is the pid (here) of the host's first process, the namespace's
// pid 1.
func (h *mhHost) init() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.p.cmd.Process.Pid, h.p.cmd.Process.Pid))
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// procs lists the host's processes (pid here, command line).
func (h *mhHost) procs() map[int]string {
	out := map[int]string{}
	if h.pidNS == "" {
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns != h.pidNS {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = strings.ReplaceAll(string(cmd), "\x00", " ")
	}
	return out
}

// kill kills the whole host: its pid namespace dies, and with it its
// mount of the volume. A process of it hung in a cut-off mount (CephFS's
// client leaves some in uninterruptible sleep) keeps the namespace alive
// until its FUSE connection is aborted, which kill does.
func (h *mhHost) kill() {
	h.p.kill()
	h.abort()
}

// stop stops the host as an operator would: SIGTERM to its spoold, which
// lets its jobs finish (or puts them back), and the host unmounts the
// volume as it goes (scripts/engines/lib.sh).
func (h *mhHost) stop() {
	for pid, cmd := range h.procs() {
		if strings.HasPrefix(cmd, "spoold ") {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	select {
	case <-h.p.done:
	case <-time.After(90 * time.Second):
		h.c.t.Errorf("host %s did not stop within 90s of its spoold's SIGTERM", h.name)
		h.kill()
	}
}

// abort aborts the host's FUSE connections once it is dead: whatever still
// waits on them fails, and the namespace goes.
func (h *mhHost) abort() {
	if h.p.alive() || len(h.fuse) == 0 {
		return
	}
	if _, err := os.Stat("/sys/fs/fuse/connections/" + strings.SplitN(h.fuse[0], ":", 2)[1]); os.IsNotExist(err) {
		syscall.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, "")
	}
	for _, dev := range h.fuse {
		os.WriteFile("/sys/fs/fuse/connections/"+strings.SplitN(dev, ":", 2)[1]+"/abort", []byte("1"), 0)
	}
	h.fuse = nil
}

// mhPrivateFUSE lists the FUSE mounts (major:minor) of pid's mount
// namespace that this process's namespace does not have.
func mhPrivateFUSE(pid int) []string {
	mine := map[string]bool{}
	for _, d := range mhFUSE("/proc/self/mountinfo") {
		mine[d] = true
	}
	var out []string
	for _, d := range mhFUSE(fmt.Sprintf("/proc/%d/mountinfo", pid)) {
		if !mine[d] {
			out = append(out, d)
		}
	}
	return out
}

func mhFUSE(mountinfo string) []string {
	b, _ := os.ReadFile(mountinfo)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" {
				if strings.HasPrefix(f[i+1], "fuse") && strings.Contains(f[2], ":") {
					out = append(out, f[2])
				}
				break
			}
		}
	}
	return out
}

// spooldLog is what spoold on the host logged.
func (h *mhHost) spooldLog() string { return h.p.logText() }

// mhRun is one attempt of a job as the job itself recorded it, and, where
// an mhDeaths watched it, when its last process died.
type mhRun struct {
	job, chat, host string
	pid             string
	first, last     time.Time
	ended           bool
	died            time.Time // zero where not watched, or still alive
}

// end is when the run was last alive: its death where it was watched
// (never before its last record), else its last record (which may be up
// to a tick, 50 ms, earlier).
func (r *mhRun) end() time.Time {
	if r.died.After(r.last) {
		return r.died
	}
	return r.last
}

// mhJobArgv is a job that records, on the local disk outside the spool,
// its start, a tick every 50 ms while it runs, and its end. Where ALIVE
// names a directory (mhDeaths), it first opens a FIFO of its own there for
// writing as its stdin (fd 0, which it never reads), a descriptor every
// process of the job inherits: the reader sees its end of file once the
// last of them has died, a kill -9 too. A process that exits closes its
// descriptors in order, fd 0 first: one that then waits, dead, to close
// its log on a cut mount (a FUSE flush the server does not answer) has
// ended, while one stuck in another call of the cut mount, which may
// still be carried out when the link heals, is alive.
func mhJobArgv(chat string, ticks int, extra string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`rec() { echo "$1 $SPOOL_JOB %s $(hostname) $$ $(date +%%s%%N)" >> "$RUNS"; }
if [ -n "${ALIVE:-}" ]; then f="$ALIVE/$SPOOL_JOB.$(hostname).$$"; mkfifo "$f" && exec 0>"$f" && echo >&0 || exit 97; fi
rec start; i=0; while [ $i -lt %d ]; do sleep 0.05; rec tick; i=$((i+1)); done; %s rec end`, chat, ticks, extra)}
}

// mhDeaths watches the FIFOs the jobs open in its directory (mhJobArgv's
// ALIVE) and notes when each job's last process died, on this process's
// clock, which is the jobs' too (one machine).
type mhDeaths struct {
	dir     string
	mu      sync.Mutex
	died    map[string]time.Time // by "job host pid", as mhReadRuns keys runs
	open    map[*os.File]bool    // the FIFOs read
	quit    chan struct{}
	stopped sync.Once
	done    sync.WaitGroup
}

func mhWatchDeaths(t testing.TB, dir string) *mhDeaths {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &mhDeaths{dir: dir, died: map[string]time.Time{}, open: map[*os.File]bool{}, quit: make(chan struct{})}
	seen := map[string]bool{}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			select {
			case <-w.quit:
				return
			case <-time.After(5 * time.Millisecond): // the jobs wait on their FIFO's reader meanwhile
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if seen[e.Name()] {
					continue
				}
				// Non-blocking: the job's open for writing waits for it.
				fd, err := syscall.Open(filepath.Join(dir, e.Name()), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				seen[e.Name()] = true
				f := os.NewFile(uintptr(fd), e.Name())
				w.mu.Lock()
				w.open[f] = true
				w.mu.Unlock()
				w.done.Add(1)
				go w.watch(f, e.Name())
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// watch reads one job's FIFO: a byte once the job opened it, then its end
// of file when no process holds it any more. Before the job opened it,
// a read also finds no writer: that end of file is waited out.
func (w *mhDeaths) watch(f *os.File, name string) {
	defer w.done.Done()
	defer func() {
		w.mu.Lock()
		if w.open[f] {
			delete(w.open, f)
			f.Close()
		}
		w.mu.Unlock()
	}()
	opened := false
	buf := make([]byte, 64)
	for {
		n, err := f.Read(buf)
		opened = opened || n > 0
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) && opened:
			at := time.Now()
			job, rest, _ := strings.Cut(name, ".")
			i := strings.LastIndexByte(rest, '.')
			if i > 0 {
				w.mu.Lock()
				w.died[job+" "+rest[:i]+" "+rest[i+1:]] = at
				w.mu.Unlock()
			}
			return
		case errors.Is(err, io.EOF):
			select {
			case <-w.quit:
				return
			case <-time.After(time.Millisecond): // not opened yet
			}
		default:
			return // closed by stop
		}
	}
}

// stop stops watching; what is still alive stays so in the record.
func (w *mhDeaths) stop() {
	w.stopped.Do(func() {
		close(w.quit)
		w.mu.Lock()
		for f := range w.open {
			f.Close() // its read returns
		}
		w.open = map[*os.File]bool{}
		w.mu.Unlock()
		w.done.Wait()
	})
}

// of adds the deaths seen to runs, and lists the watched runs whose
// processes still live.
func (w *mhDeaths) of(runs map[string][]*mhRun) (alive []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rs := range runs {
		for _, r := range rs {
			if at, ok := w.died[r.job+" "+r.host+" "+r.pid]; ok {
				r.died = at
			} else {
				alive = append(alive, fmt.Sprintf("job %s on %s (pid %s)", r.job, r.host, r.pid))
			}
		}
	}
	return alive
}

// mhReadRuns reads the jobs' record: its attempts, by job.
func mhReadRuns(t testing.TB, path string) map[string][]*mhRun {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	byAttempt := map[string]*mhRun{}
	runs := map[string][]*mhRun{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			continue
		}
		ns, err := strconv.ParseInt(fs[5], 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, ns)
		key := fs[1] + " " + fs[3] + " " + fs[4]
		r := byAttempt[key]
		if r == nil {
			r = &mhRun{job: fs[1], chat: fs[2], host: fs[3], pid: fs[4], first: at}
			byAttempt[key] = r
			runs[r.job] = append(runs[r.job], r)
		}
		r.last = at
		r.ended = r.ended || fs[0] == "end"
	}
	return runs
}

// mhOverlaps lists the attempts of one job, or of one chat, that ran at
// once on two hosts (or twice on one), each from its start to its death
// (mhRun.end): an overlap of any length.
func mhOverlaps(runs map[string][]*mhRun) []mhOverlap {
	var bad []mhOverlap
	byChat := map[string][]*mhRun{}
	for _, rs := range runs {
		for _, r := range rs {
			byChat[r.chat] = append(byChat[r.chat], r)
		}
	}
	for chat, rs := range byChat {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.first.Before(b.end()) && b.first.Before(a.end()) {
					from, to := a.first, a.end()
					if b.first.After(from) {
						from = b.first
					}
					if b.end().Before(to) {
						to = b.end()
					}
					over := to.Sub(from)
					bad = append(bad, mhOverlap{a, b, fmt.Sprintf("chat %s: job %s on %s (pid %s, %s..%s) and job %s on %s (pid %s, %s..%s) ran at once for %v",
						chat, a.job, a.host, a.pid, a.first.Format("15:04:05.000000"), a.end().Format("15:04:05.000000"),
						b.job, b.host, b.pid, b.first.Format("15:04:05.000000"), b.end().Format("15:04:05.000000"), over)})
				}
			}
		}
	}
	return bad
}

// mhOverlap is two runs of a chat at once.
type mhOverlap struct {
	a, b *mhRun
	text string
}

// serverSubmit submits on the file server's own view of the spool.
func (c *mhCluster) serverSubmit(chat string, argv ...string) string {
	c.t.Helper()
	return spooldSubmit(c.t, c.spool, append([]string{"--chat", chat, "--env", "RUNS=" + c.runs, "--"}, argv...)...)
}

// submitToStart submits a job of chat on the file server's side and
// returns how long it took to start on a host, as the job recorded it.
func (c *mhCluster) submitToStart(tb testing.TB, chat string) time.Duration {
	tb.Helper()
	began := time.Now()
	job := c.serverSubmit(chat, mhJobArgv(chat, 0, "")...)
	return c.startedAfter(tb, job, began, 5*time.Minute, 5*time.Millisecond)
}

// startedAfter waits (within, looking every every) for job's first run,
// as the job recorded it, and returns how long after began it started.
func (c *mhCluster) startedAfter(tb testing.TB, job string, began time.Time, within, every time.Duration) time.Duration {
	tb.Helper()
	var started time.Time
	eventually(tb, within, every, "job "+job+" to start", func() bool {
		for _, r := range mhReadRuns(tb, c.runs)[job] {
			started = r.first
			return true
		}
		return false
	})
	return started.Sub(began)
}

// TestMultiHostClaimLatency measures how long a job submitted on the file
// server waits before a host's spoold (--poll 200ms) starts it, over sshfs
// with sshfs's default caches and with the recommended options.
func TestMultiHostClaimLatency(t *testing.T) {
	c := mhStart(t, "sshfs")
	for _, tc := range []struct {
		name, opts string
		samples    int
		within     time.Duration
	}{
		{"recommended", mhRecommended, 10, 2 * time.Second},
		{"default", "stock", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.within == 0 && os.Getenv("MULTIHOST") != "full" {
				// Its two waits of sshfs's 20 s cache measure, not check.
				t.Skip("sshfs's defaults are measured with MULTIHOST=full")
			}
			c.t = t
			h := c.spooldHost("lat-"+tc.name, "h1", []string{"VMSP_SSHFS_OPTS=" + tc.opts}, "--poll", "200ms", "--lease", "6s", "--kill-grace", "500ms", "--metrics-file", "off")
			defer h.kill()
			// The first job warms the mount (its directory is read once).
			var waits []time.Duration
			for i := 0; i <= tc.samples; i++ {
				// The host idle a moment, as between two chats' messages:
				// what it last read of the directory is what a cache holds.
				time.Sleep(time.Second)
				if w := c.submitToStart(t, "lat-"+tc.name); i > 0 {
					waits = append(waits, w)
				}
			}
			var worst, sum time.Duration
			for _, w := range waits {
				worst = max(worst, w)
				sum += w
			}
			t.Logf("sshfs %q: submit on the server to start on the host: mean %v, worst %v over %d jobs (spoold --poll 200ms)",
				tc.opts, (sum / time.Duration(len(waits))).Round(time.Millisecond), worst.Round(time.Millisecond), len(waits))
			if tc.within > 0 && worst > tc.within {
				t.Errorf("with the recommended options a job waited %v; want within %v (two polls and the job's start)", worst, tc.within)
			}
		})
	}
}

// mhLease and mhKillGrace are spoold's settings in the proof, with
// mhArgs: short, so that a cut lasts seconds, and long enough for every
// engine's check (the kill grace and a second of staleness under half the
// lease).
const (
	mhLease     = 6 * time.Second
	mhKillGrace = 500 * time.Millisecond
)

var mhArgs = []string{"--poll", "200ms", "--lease", mhLease.String(), "--workers", "2",
	"--kill-grace", mhKillGrace.String(), "--metrics-file", "off"}

// mhSize is how much of the proof runs: MULTIHOST=full runs the whole of
// it (350 jobs over six waves, one fault each; on CephFS a seventh, whose
// cut outlasts the session), unset the short one make test runs (75 jobs
// over four waves: the two losses in one, the two clocks in one), off
// none.
func mhSize(t *testing.T) (full bool) {
	switch v := os.Getenv("MULTIHOST"); v {
	case "", "short":
		return false
	case "full":
		return true
	case "off", "0":
		t.Skip("MULTIHOST=" + v + ": the many-hosts proof is off")
	default:
		t.Fatalf("MULTIHOST=%q: want full, short or off", v)
	}
	return false
}

// TestMultiHost is the many-hosts proof, on every engine: jobs of many
// chats over three hosts, with questions and cancels, in waves, each with
// a fault while it runs: a host killed (its namespaces and mount gone at
// once, a new host in its place); a host cut off from the file servers
// past its lease, then healed; 3 % and 10 % packet loss on two hosts'
// links; one host's clock off by less than the documented bound (0.5 s)
// and one by far more (20 s, past three leases). After every wave: every
// job in exactly one final state, no job and no chat run on two hosts at
// once (as the jobs themselves recorded it, outside the spool), the cut
// host's jobs fenced within half a lease and the kill grace of its last
// heartbeat, nothing of them run after, and no result of the cut host's
// over a job another host took over.
func TestMultiHost(t *testing.T) {
	full := mhSize(t)
	for _, engine := range mhEngines {
		t.Run(engine, func(t *testing.T) {
			began := time.Now()
			mhProve(t, mhStart(t, engine), full)
			t.Logf("%s: the proof took %v", engine, time.Since(began).Round(time.Second))
		})
	}
}

// mhProof is one run of the proof.
type mhProof struct {
	t       *testing.T
	c       *mhCluster
	s       *spool.Spool
	hosts   map[string]*mhHost // by slot
	all     []*mhHost          // every host started
	chats   int
	mu      sync.Mutex
	ids     []string
	cancels map[string]bool
	cuts    []mhCut
	killed  map[string]bool // hosts killed whole (a crash)
	notes   []string
	deaths  *mhDeaths // when each run's last process died
}

// mhCallChangesNothing are the calls of a FUSE mount (the kernel function
// a process waits in, as stuckRuns reads it) that change nothing on the
// server when their answer comes late: a close's flush (coreutils close
// their stdout, the log, before they exit; nothing is cached to write
// back), and looks. A write, a create, an open (it may truncate), a
// rename or a setattr may be carried out late, and are not here.
var mhCallChangesNothing = map[string]bool{
	"fuse_flush":             true,
	"fuse_do_getattr":        true,
	"fuse_do_statx":          true,
	"fuse_getattr":           true,
	"fuse_lookup_name":       true,
	"fuse_lookup":            true,
	"fuse_dentry_revalidate": true,
	"fuse_readdir_uncached":  true,
	"fuse_readdir":           true,
	"fuse_access":            true,
}

// mhCut is one host cut off: its worker, when, and when its fence killed.
type mhCut struct {
	host          string
	began, killed time.Time
	// stuck is what the cut host's jobs' processes still alive at killed
	// wait in, by run ("job host pid"): the kernel function of the cut
	// mount's call (fuse_flush: a close), "(none)" for none. A run whose
	// FIFO is still open but held by no process whose files can be read
	// is not there: its processes are exiting, closing their files.
	stuck map[string]string
}

func mhProve(t *testing.T, c *mhCluster, full bool) {
	p := &mhProof{t: t, c: c, hosts: map[string]*mhHost{}, cancels: map[string]bool{}}
	p.deaths = mhWatchDeaths(t, filepath.Join(c.dir, "alive"))
	perWave := 21
	p.chats = 12
	if full {
		perWave, p.chats = 50, 30
	}
	for _, slot := range []string{"h1", "h2", "h3"} {
		p.hosts[slot] = c.spooldHost(map[string]string{"h1": "a", "h2": "b", "h3": "c"}[slot], slot, nil, mhArgs...)
		p.all = append(p.all, p.hosts[slot])
	}
	s, err := spool.Open(c.spool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p.s = s
	stop := p.person()
	defer stop()

	p.wave("a host killed", perWave, func() { p.replace("h2", "b2", 0) })
	p.wave("a host cut off past its lease, then healed", perWave, func() { p.partition("h3") })
	if full {
		if c.engine == "ceph" {
			// Past the session's timeout and autoclose: the MDS evicts and
			// blocklists the client, whose mount is dead after the heal;
			// the host is replaced, as an operator would remount.
			p.wave("a host cut off past its CephFS session, evicted, replaced", perWave, func() {
				p.partitionFor("h3", 45*time.Second)
				p.hosts["h3"].kill()
				p.hosts["h3"] = p.c.spooldHost("c2", "h3", nil, mhArgs...)
				p.all = append(p.all, p.hosts["h3"])
			})
		}
		p.wave("3% loss on two hosts", perWave, func() { p.loss(3, "h1", "h2") })
		p.wave("10% loss on two hosts", perWave, func() { p.loss(10, "h1", "h2") })
		// The hosts whose clocks are off start before their waves, and
		// the waves' jobs of 3 s and more each outlive a heartbeat
		// period: every host's recovery looks at every lease a few times.
		p.replace("h1", "a2", 500*time.Millisecond)
		p.waveOf("a host's clock 0.5 s ahead", perWave, 60, func() {})
		p.replace("h1", "a3", 20*time.Second)
		p.waveOf("a host's clock 20 s ahead", perWave+50, 60, func() {})
	} else {
		p.wave("3% loss on one host, 10% on another", perWave, func() { p.loss(3, "h1"); p.loss(10, "h2") })
		// The hosts whose clocks are off start before the wave, and its
		// jobs of 2 s and more each outlive a heartbeat period: every
		// host's recovery looks at every lease a few times.
		p.replace("h1", "a2", 500*time.Millisecond)
		p.replace("h2", "b3", 20*time.Second)
		// As many jobs as chats: a host under libfaketime runs its FUSE
		// client slower (a wave of 21 took 70 to 90 s on GlusterFS and
		// CephFS), and one job a chat lets every host's recovery see
		// every other's leases as well.
		p.waveOf("one host's clock 0.5 s ahead, another's 20 s", p.chats, 40, func() {})
	}
	stop()
	p.check()
}

// person is the person in each chat: answers questions, cancels some jobs
// once they run, until the returned stop.
func (p *mhProof) person() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			p.mu.Lock()
			var cancels []string
			for id := range p.cancels {
				cancels = append(cancels, id)
			}
			p.mu.Unlock()
			for _, id := range cancels {
				if st, _ := p.s.State(id); st == spool.Running {
					exec.Command(bin("spool"), "--spool", p.c.spool, "cancel", id).Run()
				}
			}
			for i := 0; i < p.chats; i++ {
				chat := fmt.Sprintf("ch%02d", i)
				if pr, err := p.s.ReadProgress(chat); err == nil && pr.Question != nil && !pr.Done {
					exec.Command(bin("spool"), "--spool", p.c.spool, "answer", "--chat", chat, "--question", pr.Question.ID, "yes").Run()
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// wave submits n jobs, does the fault while they run, and waits for all
// of them to end.
func (p *mhProof) wave(what string, n int, fault func()) { p.waveOf(what, n, 4, fault) }

// waveOf is wave with jobs of at least ticks ticks of 50 ms: a fault that
// shows only in a heartbeat (a clock off) needs jobs that outlive a few.
func (p *mhProof) waveOf(what string, n, ticks int, fault func()) {
	t := p.t
	began := time.Now()
	var ids []string
	for i := 0; i < n; i++ {
		k := len(p.ids) + i
		chat := fmt.Sprintf("ch%02d", k%p.chats)
		extra := ""
		if k%20 == 7 {
			extra = `a=$(spool ask --timeout 60s "go on?") || exit 9;`
		}
		id := spooldSubmit(t, p.c.spool, append([]string{"--chat", chat, "--attempts", "3", "--env", "RUNS=" + p.c.runs, "--env", "ALIVE=" + p.deaths.dir, "--"},
			mhJobArgv(chat, ticks+k%6, extra)...)...)
		ids = append(ids, id)
		if k%25 == 11 {
			p.mu.Lock()
			p.cancels[id] = true
			p.mu.Unlock()
		}
	}
	p.ids = append(p.ids, ids...)
	fault()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var left []string
		for _, id := range ids {
			if st, _ := p.s.State(id); !st.Final() {
				f, _ := p.s.JobFiles(id)
				left = append(left, fmt.Sprintf("%s (%s, %v)", id, st, f))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wave %q: %d of its %d jobs did not end within 3m: %s", what, len(left), n, strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond) // the poll of the wait
	}
	for _, slot := range []string{"h1", "h2", "h3"} {
		p.c.fault(slot, "heal")
	}
	p.notes = append(p.notes, fmt.Sprintf("%s: %d jobs in %v", what, n, time.Since(began).Round(100*time.Millisecond)))
}

// busy waits until a job runs on the host.
func (p *mhProof) busy(h *mhHost) {
	// Two minutes: the file system's own stalls come first. A GlusterFS
	// mount was seen to show no new job to any host for a minute, and
	// CephFS's recall of a client's caps has stalled a host for 34 s.
	eventually(p.t, 2*time.Minute, 20*time.Millisecond, "a job running on "+h.name, func() bool { return mhHostJobs(h) > 0 })
}

// replace kills the host on slot while a job runs there (a crash: with no
// offset) or stops it (with one), and starts name in its place, its clock
// (spoold's, and its FUSE client's mtimes) off by offset.
func (p *mhProof) replace(slot, name string, offset time.Duration) {
	old := p.hosts[slot]
	began := time.Now()
	if offset == 0 {
		p.busy(old)
		if p.killed == nil {
			p.killed = map[string]bool{}
		}
		p.killed[old.name] = true
		old.kill()
	} else {
		old.stop()
	}
	defer func() {
		p.notes = append(p.notes, fmt.Sprintf("host %s replaced by %s (clock %+v) in %v", old.name, name, offset, time.Since(began).Round(100*time.Millisecond)))
	}()
	var env []string
	if offset != 0 {
		env = []string{"VMSPOOL_TEST_CLOCK_OFFSET=" + offset.String(), fmt.Sprintf("VMSP_FAKETIME=%+.3f", offset.Seconds())}
	}
	p.hosts[slot] = p.c.spooldHost(name, slot, env, mhArgs...)
	p.all = append(p.all, p.hosts[slot])
}

// loss makes the slots' links drop pct % of their packets each way until
// the wave ends.
func (p *mhProof) loss(pct int, slots ...string) {
	for _, slot := range slots {
		p.c.fault(slot, "loss", strconv.Itoa(pct))
	}
}

// partition cuts the host on slot off from the file servers while a job
// runs there, for past its lease, then heals the link. Its fence must end
// its jobs within half a lease of its last heartbeat and the kill grace
// (the heartbeat is at most a third of a lease old at the cut).
func (p *mhProof) partition(slot string) {
	p.partitionFor(slot, mhLease+mhLease/2+time.Second) // past the lease: the others take its jobs over
}

// partitionFor is partition with the cut lasting length.
func (p *mhProof) partitionFor(slot string, length time.Duration) {
	t := p.t
	host := p.hosts[slot]
	p.busy(host)
	const fenceLine = "ended before its lease can expire"
	fences := strings.Count(host.spooldLog(), fenceLine)
	began := time.Now()
	p.c.fault(slot, "partition")
	within := mhLease/2 + mhLease/3 + time.Second
	eventually(t, 2*within, 20*time.Millisecond, "the fence of the cut-off host", func() bool {
		return strings.Count(host.spooldLog(), fenceLine) > fences
	})
	fenced := time.Since(began)
	if fenced > within {
		t.Errorf("host %s cut off: its fence ended its jobs %v after the cut; want within %v", host.name, fenced, within)
	}
	killed := began.Add(fenced + mhKillGrace + time.Second) // the grace, and the other jobs' fences
	// What the kill left alive, and where it waits: the sleep is the
	// point, the kill's moment.
	time.Sleep(time.Until(killed))
	p.cuts = append(p.cuts, mhCut{host: host.name, began: began, killed: killed, stuck: host.stuckRuns()})
	time.Sleep(length - time.Since(began)) // the rest of the cut
	p.c.fault(slot, "heal")
	p.notes = append(p.notes, fmt.Sprintf("host %s cut off for %v: its fence ended its jobs %v after the cut (lease %v)", host.name, length, fenced.Round(100*time.Millisecond), mhLease))
}

// check holds the invariants over the whole run.
func (p *mhProof) check() {
	t := p.t
	for _, n := range p.notes {
		t.Log(n)
	}
	states := map[spool.State]int{}
	results := map[string]*spool.Result{}
	for _, id := range p.ids {
		f, err := p.s.JobFiles(id)
		if err != nil || f.States() != 1 {
			t.Errorf("job %s: files %v (%v): want exactly one state", id, f, err)
			continue
		}
		st, _ := f.State()
		states[st]++
		if r, err := p.s.ReadResult(id, st); err == nil {
			results[id] = r
		}
	}
	t.Logf("%s: %d jobs over 3 hosts: %v", p.c.engine, len(p.ids), states)
	// No job fails here: a job loses an attempt only to a host killed or
	// cut off, and has three. A live job taken over (a clock believed)
	// shows as a lease lost on a host that was never cut off, and as
	// jobs that ran out of attempts.
	if states[spool.Failed] > 0 {
		t.Errorf("%d jobs failed; want none", states[spool.Failed])
		for id, r := range results {
			if r.State == spool.Failed && r.Error != nil {
				t.Logf("job %s failed: %s", id, *r.Error)
			}
		}
	}
	cutOff := map[string]bool{}
	for _, cut := range p.cuts {
		cutOff[cut.host] = true
	}
	for _, h := range p.all {
		// A host killed whole may log as it dies: its pid namespace's
		// processes get their SIGKILL one after another, and a run whose
		// job died first finds its lease no longer held.
		if n := strings.Count(h.spooldLog(), "lease lost"); n > 0 && !cutOff[h.name] && !p.killed[h.name] {
			t.Errorf("host %s, never cut off, lost %d leases: live jobs were taken over", h.name, n)
		}
	}
	runs := mhReadRuns(t, p.c.runs)
	// Every job is final: its processes are gone, or going (a fenced
	// one's, stuck in a call of its cut mount until it answered).
	alive := p.deaths.of(runs)
	for deadline := time.Now().Add(30 * time.Second); len(alive) > 0 && time.Now().Before(deadline); alive = p.deaths.of(runs) {
		time.Sleep(50 * time.Millisecond) // the poll of the wait
	}
	if len(alive) > 0 {
		t.Errorf("every job is final, yet %d runs' processes live on: %s", len(alive), strings.Join(alive, ", "))
	}
	// A run of a cut-off host that recorded nothing after its fence's kill
	// and lived on only waiting in its cut mount to close a file (a FUSE
	// flush, which writes nothing: coreutils close their stdout, the log,
	// before they exit) ended at the kill: it runs nothing more, and the
	// flush fails or does nothing once the link heals. One waiting in any
	// other call of the mount, whose call may still be carried out, lived
	// until it died.
	for _, cut := range p.cuts {
		waited := 0
		for _, rs := range runs {
			for _, r := range rs {
				// A run that began before the kill: one started as the
				// link was cut (its claim made just before) is the fence's
				// too.
				if r.host != cut.host || !r.first.Before(cut.killed) || !r.died.After(cut.killed) || r.last.After(cut.killed) {
					continue
				}
				switch call := cut.stuck[r.job+" "+r.host+" "+r.pid]; {
				case call == "" || mhCallChangesNothing[call]:
					// A close's flush or a look (a stat, a lookup, a
					// listing) that only waits for its answer, or a process
					// whose files are being closed as it exits (its file
					// table is no longer readable): it runs nothing more,
					// and what it waits for changes nothing when it comes.
					r.died = cut.killed
					waited++
				default:
					t.Errorf("job %s on the cut-off host %s (pid %s): killed, and still in %s of its cut mount until %s: a call that may be carried out late",
						r.job, r.host, r.pid, call, r.died.Format("15:04:05.000"))
				}
			}
		}
		if waited > 0 {
			p.t.Logf("host %s cut off: %d of its runs, killed, waited on a close or a look in the cut mount", cut.host, waited)
		}
	}
	for _, o := range mhOverlaps(runs) {
		t.Error(o.text)
		p.logJobs(o.a.job, o.b.job)
	}
	attempts, byHost := 0, map[string]int{}
	for _, rs := range runs {
		attempts += len(rs)
		for _, r := range rs {
			byHost[r.host]++
		}
	}
	t.Logf("%d attempts recorded by the jobs, by host %v", attempts, byHost)
	// Nothing of a cut host's jobs ran after its fence's kill, and no
	// result it wrote late stands over a job another host took over.
	for _, cut := range p.cuts {
		for job, rs := range runs {
			var latest *mhRun
			for _, r := range rs {
				if r.host == cut.host && r.first.Before(cut.began) && r.end().After(cut.killed) {
					t.Errorf("job %s ran on the cut-off host %s until %s, after its fence's kill at %s",
						job, r.host, r.end().Format("15:04:05.000"), cut.killed.Format("15:04:05.000"))
				}
				if latest == nil || r.first.After(latest.first) {
					latest = r
				}
			}
			res := results[job]
			if res != nil && latest != nil && latest.host != cut.host && latest.first.After(cut.began) && strings.HasPrefix(res.Worker, cut.host+":") {
				t.Errorf("job %s: the result is the cut-off host %s's (%s), over the run host %s took over", job, cut.host, res.Worker, latest.host)
				p.logJobs(job)
			}
		}
	}
}

// logJobs logs what every host's spoold said of the jobs, for a failure.
func (p *mhProof) logJobs(jobs ...string) {
	for _, h := range p.all {
		for _, l := range strings.Split(h.spooldLog(), "\n") {
			for _, job := range jobs {
				if strings.Contains(l, job) {
					p.t.Logf("%s: %s", h.name, l)
					break
				}
			}
		}
	}
}

// stuckRuns lists the host's processes of jobs watched by mhDeaths (their
// stdin is their run's FIFO) by run, with the FUSE call each waits in
// (from its kernel stack; "" where it waits in none): a call of the
// mount that does not answer, which even SIGKILL does not end.
func (h *mhHost) stuckRuns() map[string]string {
	out := map[string]string{}
	for pid := range h.procs() {
		// The run's FIFO is the job's stdin, and wherever a shell saved
		// it (dash keeps fd 0 at fd 10 while a command's stdin is
		// redirected).
		fifo := ""
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.Contains(l, "/alive/") {
				fifo = l
				break
			}
		}
		if fifo == "" {
			continue
		}
		job, rest, _ := strings.Cut(filepath.Base(fifo), ".")
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			continue
		}
		key := job + " " + rest[:i] + " " + rest[i+1:]
		call := ""
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", pid))
		for _, l := range strings.Split(string(stack), "\n") {
			if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], "fuse_") && !strings.HasPrefix(f[1], "fuse_simple") && !strings.HasPrefix(f[1], "fuse_request") {
				call, _, _ = strings.Cut(f[1], "+")
				break
			}
		}
		if call == "" {
			call = "(none)"
		}
		if prev, ok := out[key]; !ok || prev == "fuse_flush" {
			out[key] = call // a call that is not a close's flush says more
		}
	}
	return out
}

// mhHostJobs counts the jobs running on the host (processes that record
// themselves in the runs file).
func mhHostJobs(h *mhHost) int {
	n := 0
	for _, cmd := range h.procs() {
		if strings.Contains(cmd, "rec start") {
			n++
		}
	}
	return n
}

// TestMultiHostWatchers: `watchd follow --poll` and `watchd serve --poll`
// on host B relay a run spoold runs on host A to its end, with both
// guards: the chat's first run had ended (its document says done) before
// the watchers started, and neither takes it for the second run's end.
func TestMultiHostWatchers(t *testing.T) {
	c := mhStart(t, "sshfs")
	c.spooldHost("a", "h1", nil, "--poll", "200ms", "--lease", "6s", "--kill-grace", "500ms", "--metrics-file", "off")
	first := c.serverSubmit("w", "sh", "-c", "spool say first-1; spool say first-2")
	s, err := spool.Open(c.spool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitEnd(t, s, first, 30*time.Second, 20*time.Millisecond)
	time.Sleep(30 * time.Millisecond) // the watchers start after the first run's stamps: the guard's case
	addrFile := filepath.Join(c.dir, "addr")
	follow := c.host("bf", "h2", nil, "sh", "-c", `exec watchd follow --spool "$SPOOL" --chat w --poll 300ms --timeout 60s`)
	c.host("bs", "h3", nil, "sh", "-c", `exec watchd serve --spool "$SPOOL" --poll 300ms --listen 127.0.0.1:0 --addr-file "$0"`, addrFile)
	var addr []byte
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd serve on host bs to listen", func() bool {
		addr, _ = os.ReadFile(addrFile)
		return len(addr) > 0
	})
	// The token, as the file server sees it: the host made it in the
	// spool. Host bs's loopback is its own: the stream is read through a
	// connection made in its network namespace.
	serveRegister(t, c.spool, strings.TrimSpace(string(addr)))
	client := &http.Client{Transport: tokenTransport{&http.Transport{DialContext: mhDialIn(mhNetns("h3"))}}}
	stream, code := watchdStreamWith(t, t.Context(), client, "http://"+strings.TrimSpace(string(addr))+"/chats/w/events", "")
	if code != 200 {
		t.Fatalf("GET /chats/w/events on host bs: %d", code)
	}
	// Neither stops on the first run's document.
	time.Sleep(time.Second) // a window in which they must not stop
	if !follow.p.alive() {
		t.Fatalf("the follower on host bf stopped on the first run's document: %s", follow.p.logText())
	}
	second := c.serverSubmit("w", "sh", "-c", "sleep 0.5; spool say second-1; sleep 0.5; spool say second-2")
	select {
	case <-follow.p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the follower on host bf did not end with the second run")
	}
	if follow.p.err != nil {
		t.Errorf("the follower on host bf exited %v: %s", follow.p.err, follow.p.logText())
	}
	out := follow.p.logText()
	for _, want := range []string{"second-1", "second-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the follower on host bf did not relay %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "first-") {
		t.Errorf("the follower on host bf relayed the first run:\n%s", out)
	}
	got := strings.Join(watchdTexts(stream), " ")
	if !strings.Contains(got, "second-1") || !strings.Contains(got, "second-2") || strings.Contains(got, "first-") {
		t.Errorf("the stream of host bs: %s; want the second run's statuses only", got)
	}
	if r, _ := s.ReadResult(second, spool.Done); r == nil {
		t.Errorf("the second run did not end done")
	}
}

// mhNetns is the network namespace of slot: the engine scripts' names,
// whose prefix VMSP_NS moves (scripts/engines/lib.sh).
func mhNetns(slot string) string {
	ns := os.Getenv("VMSP_NS")
	if ns == "" {
		ns = "vmsp"
	}
	return ns + "-" + slot
}

// mhDialIn dials from inside the network namespace netns (a host's): the
// socket is made there, on a thread switched there for the call.
func mhDialIn(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + netns)
		if err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("setns %s: %w", netns, err)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			// A thread left in the other namespace is never handed back:
			// it ends with this goroutine.
			runtime.UnlockOSThread()
		}
		return conn, err
	}
}

// TestMultiHostRefusesUnsafe: on a shared filesystem spoold refuses, at
// start, with one line and a non-zero exit, the settings that would break
// an invariant: no --poll (another host's claims and runs are never seen),
// and a lease too short for its kill grace and sshfs's whole seconds.
func TestMultiHostRefusesUnsafe(t *testing.T) {
	c := mhStart(t, "sshfs")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no poll", []string{"--lease", "30s"}, "only --poll guards a chat's run across hosts"},
		{"short lease", []string{"--poll", "1s", "--lease", "6s", "--kill-grace", "5s"}, "want --lease of at least 14.7s"},
	} {
		h := c.host("refused-"+strings.ReplaceAll(tc.name, " ", "-"), "h1", nil,
			append([]string{"sh", "-c", `spoold --spool "$SPOOL" --metrics-file off "$@"; echo "spoold exit $?"`, "spoold"}, tc.args...)...)
		select {
		case <-h.p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: spoold did not exit", tc.name)
		}
		out := h.p.logText()
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "spoold exit 2") {
			t.Errorf("%s: spoold said %q; want a refusal naming %q and exit 2", tc.name, out, tc.want)
		}
	}
}
