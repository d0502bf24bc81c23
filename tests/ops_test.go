package tests

// Running the daemons as services (docs/operations.md): systemd's notify
// protocol as a unit would see it, the metrics an operator scrapes and the
// textfile node_exporter reads, several hosts on one spool, --version, and
// the files of dist/ and `make install`.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// opsNotify is a socket in the place of systemd's: it collects every
// datagram a daemon sends to NOTIFY_SOCKET.
type opsNotify struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func opsListenNotify(t *testing.T) *opsNotify {
	t.Helper()
	// A socket path must fit in 108 bytes: t.TempDir's may not.
	dir, err := os.MkdirTemp("", "ops-notify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &opsNotify{path: filepath.Join(dir, "notify"), more: make(chan struct{}, 1)}
	n.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := n.conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			// One datagram may hold several assignments, one a line.
			n.got = append(n.got, strings.Split(strings.TrimSpace(string(buf[:k])), "\n")...)
			n.mu.Unlock()
			select {
			case n.more <- struct{}{}:
			default:
			}
		}
	}()
	return n
}

// wait waits until an assignment equal to want has arrived, and returns
// everything received so far.
func (n *opsNotify) wait(t *testing.T, want string, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		n.mu.Lock()
		got := append([]string(nil), n.got...)
		n.mu.Unlock()
		for _, g := range got {
			if g == want {
				return got
			}
		}
		select {
		case <-n.more:
		case <-deadline:
			t.Fatalf("no %s on NOTIFY_SOCKET within %v; got %q", want, within, got)
		}
	}
}

func (n *opsNotify) index(want string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range n.got {
		if g == want {
			return i
		}
	}
	return -1
}

// opsStart starts name with env added to the test's environment.
func opsStart(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	return startProc(t, append(os.Environ(), env...), name, args...)
}

// opsServeWatchd starts watchd serve on dir at a free loopback port and
// returns its base URL once it listens.
func opsServeWatchd(t *testing.T, dir string) string {
	base, _ := opsServeWatchdPage(t, dir)
	return base
}

// opsServeWatchdPage is opsServeWatchd, and also returns the page's
// address as watchd serve printed it, with its token.
func opsServeWatchdPage(t *testing.T, dir string) (base, page string) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	p := opsStart(t, nil, "watchd", "serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd to listen", func() bool {
		b, _ := os.ReadFile(addrFile)
		base = "http://" + strings.TrimSpace(string(b))
		return len(b) > 0
	})
	serveRegister(t, dir, strings.TrimPrefix(base, "http://"))
	const said = "the live page is at "
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd serve to print the page's address", func() bool {
		log := p.logText()
		i := strings.Index(log, said)
		if i < 0 {
			return false
		}
		page, _, _ = strings.Cut(log[i+len(said):], "\n")
		return true
	})
	return base, page
}

// opsFreeAddr returns a loopback address with a port free a moment ago.
func opsFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func opsGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// opsMetric returns the value of the series named exactly series (name
// and labels as the exposition format prints them), or -1.
func opsMetric(text, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			f := strings.Fields(rest)
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				return v
			}
		}
	}
	return -1
}

func opsSubmit(t *testing.T, dir, chat string, argv ...string) string {
	t.Helper()
	args := append([]string{"--spool", dir, "submit", "--chat", chat, "--"}, argv...)
	out, err := exec.Command(bin("spool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("spool submit: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func opsWaitEnded(t *testing.T, s *spool.Spool, job string, within time.Duration) *spool.Result {
	t.Helper()
	var r *spool.Result
	eventually(t, within, 20*time.Millisecond, "job "+job+" to end", func() bool {
		st, err := s.State(job)
		if err != nil || !st.Final() {
			return false
		}
		r, err = s.ReadResult(job, st)
		return err == nil
	})
	return r
}

// TestOpsNotify starts each daemon the way a Type=notify unit does, with
// NOTIFY_SOCKET and WATCHDOG_USEC set, and checks that READY=1 comes once
// the daemon works, that the watchdog is pinged, and that SIGTERM brings
// STOPPING=1 and an exit 0.
func TestOpsNotify(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(dir string) []string
		// works checks, right after READY=1, that the daemon does its job.
		works func(t *testing.T, dir string, args []string)
	}{
		{"spoold", func(dir string) []string { return []string{"--spool", dir} }, func(t *testing.T, dir string, _ []string) {
			for _, d := range []string{spool.ProgressDir, spool.ChatsDir, spool.CorruptDir, spool.GateDir, spool.DoorbellDir} {
				if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
					t.Errorf("READY=1 before the tree was made: %s: %v", d, err)
				}
			}
		}},
		{"watchd", func(dir string) []string {
			return []string{"serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "..", "addr")}
		}, func(t *testing.T, dir string, _ []string) {
			addr, err := os.ReadFile(filepath.Join(dir, "..", "addr"))
			if err != nil {
				t.Fatalf("READY=1 before the address was written: %v", err)
			}
			serveRegister(t, dir, strings.TrimSpace(string(addr)))
			if code, _ := opsGet(t, "http://"+strings.TrimSpace(string(addr))+"/chats"); code != 200 {
				t.Errorf("GET /chats right after READY=1: %d", code)
			}
		}},
		{"vmgate", func(dir string) []string { return []string{"serve", "--spool", dir} }, func(t *testing.T, dir string, _ []string) {
			if fi, err := os.Stat(filepath.Join(dir, spool.GateDir, "in")); err != nil || !fi.IsDir() {
				t.Errorf("READY=1 before gate/in existed: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newSpool(t)
			n := opsListenNotify(t)
			args := tc.args(dir)
			p := opsStart(t, []string{"NOTIFY_SOCKET=" + n.path, "WATCHDOG_USEC=300000"}, tc.name, args...)
			n.wait(t, "READY=1", 20*time.Second)
			tc.works(t, dir, args)
			n.wait(t, "WATCHDOG=1", 5*time.Second)
			p.stop(t, 20*time.Second)
			n.wait(t, "STOPPING=1", time.Second)
			if r, s := n.index("READY=1"), n.index("STOPPING=1"); s < r {
				t.Errorf("STOPPING=1 (at %d) before READY=1 (at %d)", s, r)
			}
		})
	}
}

// TestOpsNotifyOff: without NOTIFY_SOCKET (a shell, cron, a test) the
// daemons start and stop as before.
func TestOpsNotifyOff(t *testing.T) {
	dir := newSpool(t)
	p := opsStart(t, []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC="}, "spoold", "--spool", dir)
	eventually(t, 20*time.Second, 20*time.Millisecond, "spoold to make the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, spool.GateDir))
		return err == nil
	})
	p.stop(t, 20*time.Second)
}

// TestOpsSpooldTextfile runs two jobs and reads spoold's node_exporter
// textfile, as node_exporter would.
func TestOpsSpooldTextfile(t *testing.T) {
	dir := newSpool(t)
	prom := filepath.Join(t.TempDir(), "textfile", "spoold.prom")
	p := opsStart(t, nil, "spoold", "--spool", dir, "--workers", "2", "--metrics-file", prom, "--metrics-every", "100ms")
	s := openSpool(t, dir, 200)
	ok := opsSubmit(t, dir, "m1", "sh", "-c", "spool say one; spool say two")
	bad := opsSubmit(t, dir, "m2", "sh", "-c", "exit 3")
	opsWaitEnded(t, s, ok, 30*time.Second)
	opsWaitEnded(t, s, bad, 30*time.Second)
	var text string
	eventually(t, 10*time.Second, 20*time.Millisecond, "the textfile to count both jobs", func() bool {
		b, _ := os.ReadFile(prom)
		text = string(b)
		return opsMetric(text, `vmspool_spoold_jobs_ended_total{state="done"}`) == 1 &&
			opsMetric(text, `vmspool_spoold_jobs_ended_total{state="failed"}`) == 1
	})
	for series, want := range map[string]float64{
		`vmspool_spoold_claims_total`:                                              2,
		`vmspool_spoold_jobs_ended_total{state="cancelled"}`:                       0,
		`vmspool_spoold_jobs_running`:                                              0,
		`vmspool_spoold_claim_latency_seconds_count`:                               2,
		`vmspool_spoold_run_seconds_count{state="done"}`:                           1,
		`vmspool_spoold_recoveries_total{action="requeued"}`:                       0,
		`vmspool_gate_decisions_total{git="none",outcome="allowed",reason="none"}`: 0,
	} {
		if got := opsMetric(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := opsMetric(text, "vmspool_spoold_progress_flushes_total"); got < 2 {
		t.Errorf("progress_flushes_total = %v, want at least 2", got)
	}
	if !strings.Contains(text, `vmspool_build_info{daemon="spoold"`) {
		t.Error("textfile lacks vmspool_build_info")
	}
	if strings.Contains(text, "go_goroutines") || strings.Contains(text, "process_cpu") {
		t.Error("textfile holds go_*/process_* series, which node_exporter refuses to repeat")
	}
	fi, err := os.Stat(prom)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		t.Errorf("textfile %v: node_exporter runs as another user and must read it", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(prom))
	for _, e := range ents {
		if e.Name() != "spoold.prom" {
			t.Errorf("textfile dir holds %s: a temporary left behind", e.Name())
		}
	}
	p.stop(t, 20*time.Second)
}

// TestOpsWatchdMetrics follows a run over an event stream, then scrapes
// watchd serve's /metrics.
func TestOpsWatchdMetrics(t *testing.T) {
	dir := newSpool(t)
	opsStart(t, nil, "spoold", "--spool", dir)
	base := opsServeWatchd(t, dir)
	job := opsSubmit(t, dir, "w1", "sh", "-c", "spool say hello; spool say bye")
	resp, err := http.Get(base + "/chats/w1/events?job=" + job)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body) // the stream ends after the run's end
	resp.Body.Close()
	if !bytes.Contains(stream, []byte("event: end")) {
		t.Fatalf("stream without its end:\n%s", stream)
	}
	opsGet(t, base+"/")
	code, text := opsGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d\n%s", code, text)
	}
	for series, want := range map[string]float64{
		`vmspool_watchd_subscribers`:                   0,
		`vmspool_watchd_subscriptions_total`:           1,
		`vmspool_watchd_events_sent_total{kind="end"}`: 1,
	} {
		if got := opsMetric(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := opsMetric(text, `vmspool_watchd_events_sent_total{kind="status"}`); got < 2 {
		t.Errorf(`events_sent_total{kind="status"} = %v, want at least 2`, got)
	}
	for _, want := range []string{`vmspool_build_info{daemon="watchd"`, `go_goroutines `, `vmspool_watchd_http_requests_total{code="200",route="page"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestOpsGateMetrics drops requests in gate/in/ and scrapes vmgate serve's
// /metrics.
func TestOpsGateMetrics(t *testing.T) {
	dir := newSpool(t)
	addr := opsFreeAddr(t)
	opsStart(t, nil, "vmgate", "serve", "--spool", dir, "--metrics-listen", addr)
	in := filepath.Join(dir, spool.GateDir, "in")
	eventually(t, 20*time.Second, 20*time.Millisecond, "vmgate to make gate/in", func() bool {
		_, err := os.Stat(in)
		return err == nil
	})
	for id, script := range map[string]string{"ok1": "echo hello\n", "push1": "git push origin main\n", "add1": "git add -A\n"} {
		tmp := filepath.Join(in, "."+id+".sh")
		os.WriteFile(tmp, []byte(script), 0o640)
		if err := os.Rename(tmp, filepath.Join(in, id+".sh")); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, spool.GateDir, "out")
	eventually(t, 20*time.Second, 20*time.Millisecond, "three verdicts", func() bool {
		for _, id := range []string{"ok1", "push1", "add1"} {
			if _, err := os.Stat(filepath.Join(out, id+".json")); err != nil {
				return false
			}
		}
		return true
	})
	var text string
	eventually(t, 10*time.Second, 20*time.Millisecond, "/metrics to count three decisions", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		return opsMetric(text, "vmspool_gate_decision_seconds_count") == 3
	})
	for series, want := range map[string]float64{
		`vmspool_gate_decisions_total{git="none",outcome="allowed",reason="none"}`:      1,
		`vmspool_gate_decisions_total{git="push",outcome="refused",reason="git-write"}`: 1,
		`vmspool_gate_decisions_total{git="add",outcome="refused",reason="git-write"}`:  1,
	} {
		if got := opsMetric(text, series); got != want {
			t.Errorf("%s = %v, want %v\n%s", series, got, want, text)
		}
	}
	if !strings.Contains(text, `vmspool_build_info{daemon="vmgate"`) {
		t.Error("/metrics lacks vmspool_build_info")
	}
}

// TestOpsManyHosts runs two spoold with their own --host names, polling
// (as on NFS, where inotify sees nothing of the other host), on one spool:
// every job runs exactly once, and both hosts take a share.
func TestOpsManyHosts(t *testing.T) {
	dir := newSpool(t)
	ran := filepath.Join(t.TempDir(), "ran")
	os.Mkdir(ran, 0o755)
	a := opsStart(t, nil, "spoold", "--spool", dir, "--host", "hosta", "--poll", "200ms", "--workers", "3", "--lease", "5s")
	b := opsStart(t, nil, "spoold", "--spool", dir, "--host", "hostb", "--poll", "200ms", "--workers", "3", "--lease", "5s")
	s := openSpool(t, dir, 200)

	const n = 50
	jobs := make([]string, n)
	for i := range jobs {
		// Each run leaves one file named after the job and its shell's
		// pid: two runs of a job would leave two.
		jobs[i] = fmt.Sprintf("many-%02d", i)
		spec := fmt.Sprintf(`{"chat":"many%02d","argv":["sh","-c","sleep 0.1; : > \"$0/$SPOOL_JOB.$$\"","%s"]}`, i, ran)
		spooldHandSubmit(t, dir, jobs[i], fmt.Sprintf("many%02d", i), spec)
	}
	// The leases of running jobs name the host that holds them.
	leaseHosts := map[string]bool{}
	eventually(t, 60*time.Second, 20*time.Millisecond, "every job to end", func() bool {
		ended := 0
		for _, job := range jobs {
			st, _ := s.State(job)
			switch {
			case st.Final():
				ended++
			case st == spool.Running:
				if l, _, err := s.ReadLease(job); err == nil {
					leaseHosts[l.Host] = true
				}
			}
		}
		return ended == n
	})
	workers := map[string]int{}
	for _, job := range jobs {
		st, _ := s.State(job)
		r, err := s.ReadResult(job, st)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != spool.Done || r.Attempt != 1 {
			t.Errorf("job %s: %s, attempt %d; want done at attempt 1", job, r.State, r.Attempt)
		}
		host, _, _ := strings.Cut(r.Worker, ":")
		workers[host]++
		runs, _ := filepath.Glob(filepath.Join(ran, job+".*"))
		if len(runs) != 1 {
			t.Errorf("job %s ran %d times, want exactly once", job, len(runs))
		}
	}
	if workers["hosta"] == 0 || workers["hostb"] == 0 || workers["hosta"]+workers["hostb"] != n {
		t.Errorf("results by host %v: want both hosts, %d in all", workers, n)
	}
	if !leaseHosts["hosta"] || !leaseHosts["hostb"] {
		t.Errorf("leases seen for hosts %v: want hosta and hostb", leaseHosts)
	}
	t.Logf("jobs by host: %v", workers)
	a.stop(t, 20*time.Second)
	b.stop(t, 20*time.Second)
	// Each host wrote its own metrics textfile under the shared spool
	// (the default name holds --host), counting its own jobs only.
	for _, host := range []string{"hosta", "hostb"} {
		b, err := os.ReadFile(filepath.Join(dir, "metrics", "spoold-"+host+".prom"))
		if err != nil {
			t.Errorf("%s's textfile: %v", host, err)
			continue
		}
		if got := opsMetric(string(b), `vmspool_spoold_jobs_ended_total{state="done"}`); got != float64(workers[host]) {
			t.Errorf("%s's textfile counts %v jobs done; its results say %d", host, got, workers[host])
		}
	}
}

// TestOpsVersion: every binary prints "name version (revision)" from its
// build information.
func TestOpsVersion(t *testing.T) {
	re := regexp.MustCompile(`^(spool|spoold|watchd|vmgate) (\S+)( \(([0-9a-f]{7,40})(-dirty)?\))?\n$`)
	for _, name := range []string{"spool", "spoold", "watchd", "vmgate"} {
		out, err := exec.Command(bin(name), "--version").CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v: %s", name, err, out)
			continue
		}
		m := re.FindStringSubmatch(string(out))
		if m == nil || m[1] != name {
			t.Errorf("%s --version = %q; want %q", name, out, name+" VERSION (REVISION)")
			continue
		}
		// A build inside a git checkout is stamped with its revision (the
		// tests build with go build in this checkout, like make does).
		if _, err := os.Stat("../.git"); err == nil && m[4] == "" {
			t.Logf("%s --version has no revision (%q): built without VCS information", name, out)
		}
	}
}

// TestOpsVersionStamped builds spoold the way `make build` does and checks
// that --version names the checkout's revision.
func TestOpsVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	head, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "spoold")
	build := exec.Command("go", "build", "-buildvcs=auto", "-trimpath", "-o", exe, "./cmd/spoold")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	out, err := exec.Command(exe, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if rev := strings.TrimSpace(string(head))[:12]; !strings.Contains(string(out), "("+rev) {
		t.Errorf("spoold --version = %q; want the revision %s", out, rev)
	}
}

// opsUnit reads a systemd unit into key -> values.
func opsUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: not key=value: %q", path, line)
			continue
		}
		u[k] = append(u[k], v)
	}
	return u
}

// TestOpsUnits checks what docs/operations.md promises of dist/systemd,
// and that every flag an ExecStart= passes exists (the daemon parses them
// and then -h stops it).
func TestOpsUnits(t *testing.T) {
	for _, name := range []string{"spoold", "watchd", "vmgate"} {
		t.Run(name, func(t *testing.T) {
			u := opsUnit(t, filepath.Join("..", "dist", "systemd", name+".service"))
			for k, want := range map[string]string{
				"Type": "notify", "NotifyAccess": "main", "WatchdogSec": "30s", "User": "vmspool", "Group": "vmspool",
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ReadWritePaths": "/var/spool/vm",
				"PrivateTmp": "yes", "Restart": "on-failure",
			} {
				if got := u[k]; len(got) != 1 || got[0] != want {
					t.Errorf("%s=%q, want %q", k, got, want)
				}
			}
			if len(u["ProtectHome"]) != 1 {
				t.Errorf("ProtectHome=%q", u["ProtectHome"])
			}
			if len(u["ExecStart"]) != 1 {
				t.Fatalf("ExecStart=%q", u["ExecStart"])
			}
			argv := strings.Fields(u["ExecStart"][0])
			if argv[0] != "/usr/local/bin/"+name {
				t.Errorf("ExecStart runs %s", argv[0])
			}
			args := append(argv[1:], "-h")
			out, err := exec.Command(bin(name), args...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %q: %v: %s", name, args, err, out)
			}
		})
	}
	if u := opsUnit(t, filepath.Join("..", "dist", "systemd", "spoold.service")); len(u["KillMode"]) != 1 || u["KillMode"][0] != "mixed" {
		t.Errorf("spoold KillMode=%q: want mixed, so that jobs get their grace", u["KillMode"])
	}
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		// verify wants the binaries where ExecStart says: point it at ours.
		tmp := t.TempDir()
		var units []string
		for _, name := range []string{"spoold", "watchd", "vmgate"} {
			b, _ := os.ReadFile(filepath.Join("..", "dist", "systemd", name+".service"))
			b = bytes.ReplaceAll(b, []byte("/usr/local/bin/"), []byte(binDir+"/"))
			p := filepath.Join(tmp, name+".service")
			os.WriteFile(p, b, 0o644)
			units = append(units, p)
		}
		out, err := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	}
}

// TestOpsCrontab: each line of dist/cron/vmspool is a cron.d line (five
// time fields, a user, a command), and its spool commands run on a spool.
func TestOpsCrontab(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "dist", "cron", "vmspool"))
	if err != nil {
		t.Fatal(err)
	}
	dir := newSpool(t)
	if s, err := spool.Create(dir); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	var cmds []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || regexp.MustCompile(`^[A-Z_]+=`).MatchString(line) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 7 || f[5] != "vmspool" {
			t.Errorf("not a cron.d line for user vmspool: %q", line)
			continue
		}
		cmds = append(cmds, strings.Join(f[6:], " "))
	}
	if len(cmds) != 2 {
		t.Fatalf("crontab has %d commands, want gc and fsck: %q", len(cmds), cmds)
	}
	for _, c := range cmds {
		if !strings.Contains(c, "spool gc") && !strings.Contains(c, "spool fsck") {
			t.Errorf("unexpected cron command %q", c)
		}
		sh := exec.Command("sh", "-c", c)
		sh.Env = append(os.Environ(), "SPOOL_DIR="+dir)
		if out, err := sh.CombinedOutput(); err != nil {
			t.Errorf("%q on an empty spool: %v: %s", c, err, out)
		}
	}
}

// TestOpsMakeInstall runs the Makefile's install target into a DESTDIR,
// over stand-in binaries (the real ones are TestMain's).
func TestOpsMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	src := t.TempDir()
	for _, p := range []string{"Makefile", "docs/operations.md", "clients/python/vmspool.py",
		"clients/openwebui/vm_agent.py", "clients/openwebui/vm_agent_progress.py"} {
		opsCopy(t, filepath.Join("..", p), filepath.Join(src, p))
	}
	ents, _ := filepath.Glob(filepath.Join("..", "dist", "*", "*"))
	for _, e := range ents {
		rel, _ := filepath.Rel("..", e)
		opsCopy(t, e, filepath.Join(src, rel))
	}
	for _, name := range []string{"spool", "spoold", "watchd", "vmgate"} {
		opsCopy(t, bin(name), filepath.Join(src, "bin", name))
	}
	dest := filepath.Join(t.TempDir(), "dest")
	cmd := exec.Command("make", "-o", "build", "install", "DESTDIR="+dest, "PREFIX=/usr")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for path, mode := range map[string]os.FileMode{
		"usr/bin/spoold":                                   0o755,
		"usr/bin/spool":                                    0o755,
		"usr/lib/systemd/system/spoold.service":            0o644,
		"usr/lib/systemd/system/watchd.service":            0o644,
		"usr/lib/systemd/system/vmgate.service":            0o644,
		"usr/lib/sysusers.d/vmspool.conf":                  0o644,
		"usr/lib/tmpfiles.d/vmspool.conf":                  0o644,
		"etc/cron.d/vmspool":                               0o644,
		"etc/logrotate.d/vmspool":                          0o644,
		"usr/share/doc/vmspool/operations.md":              0o644,
		"usr/lib/vmspool/vmspool.py":                       0o644,
		"usr/share/vmspool/openwebui/vm_agent.py":          0o644,
		"usr/share/vmspool/openwebui/vm_agent_progress.py": 0o644,
		"usr/share/vmspool/grafana/vmspool.json":           0o644,
		"usr/share/vmspool/prometheus/vmspool.rules.yml":   0o644,
	} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("make install did not put %s: %v", path, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	u := opsUnit(t, filepath.Join(dest, "usr/lib/systemd/system/spoold.service"))
	if got := u["ExecStart"]; len(got) != 1 || !strings.HasPrefix(got[0], "/usr/bin/spoold ") {
		t.Errorf("installed unit runs %q; want /usr/bin/spoold for PREFIX=/usr", got)
	}
}

func opsCopy(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(from)
	os.MkdirAll(filepath.Dir(to), 0o755)
	if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// TestOpsLogrotate rotates a job's log with dist/logrotate/vmspool while
// the "job" holds it open with O_APPEND, as spoold's jobs do: the copy
// holds what was written, and the job's next write lands at the start of
// the truncated log, with no hole of zeros before it.
func TestOpsLogrotate(t *testing.T) {
	lr, err := exec.LookPath("logrotate")
	if err != nil {
		t.Skip("no logrotate (apt-get install logrotate)")
	}
	b, err := os.ReadFile(filepath.Join("..", "dist", "logrotate", "vmspool"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir, old := filepath.Join(tmp, "spool"), filepath.Join(tmp, "old")
	os.Mkdir(dir, 0o750)
	conf := string(b)
	for from, to := range map[string]string{
		"/var/spool/vm": dir, "/var/log/vmspool": old, "size 50M": "size 1k",
		// the test runs as whoever runs it, not as vmspool
		"\tsu vmspool vmspool\n": "", " 0750 vmspool vmspool": "",
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("dist/logrotate/vmspool lacks %q", from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	confPath := filepath.Join(tmp, "logrotate.conf")
	os.WriteFile(confPath, []byte(conf), 0o644)

	log := filepath.Join(dir, "job1.log")
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := strings.Repeat("a line the job wrote before the rotation\n", 100)
	f.WriteString(before)
	if out, err := exec.Command(lr, "-s", filepath.Join(tmp, "state"), confPath).CombinedOutput(); err != nil {
		t.Fatalf("logrotate: %v\n%s", err, out)
	}
	f.WriteString("after\n")
	got, _ := os.ReadFile(log)
	if string(got) != "after\n" {
		t.Errorf("the log after rotation holds %q; want only the job's next line", got)
	}
	copied, err := os.ReadFile(filepath.Join(old, "job1.log.1"))
	if err != nil || string(copied) != before {
		t.Errorf("the rotated copy: %v, %d bytes; want the %d bytes written before", err, len(copied), len(before))
	}
}
