package tests

// make bench: submit-to-claim latency and no-op jobs per second, with
// inotify and with --poll beside it, and spoold's resident memory idle and
// with 100,000 jobs queued. The real binary runs as its own process, with
// logging on (to a file).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fsnotify/fsnotify"
)

// spooldBenchPoll is the rescan interval of the --poll rows.
const spooldBenchPoll = 50 * time.Millisecond

// spooldBenchChats is how many chats the no-op jobs take turns in: a chat
// is a conversation with many runs, so its directory and lock file exist
// after its first job; 64 keeps two jobs of one chat from meeting in 4
// workers.
const spooldBenchChats = 64

// spooldQueue writes a no-op job's spec and marker straight into the tree
// (no fsync: the setup is not what is measured). It returns the marker's
// temporary name, to be renamed into place by the caller, if hold.
func spooldQueue(b testing.TB, dir, id, chat string, hold bool) string {
	spec, _ := json.Marshal(map[string]any{"chat": chat, "argv": []string{"true"}})
	if err := os.WriteFile(filepath.Join(dir, id+".json"), spec, 0o640); err != nil {
		b.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+id+".ready")
	if err := os.WriteFile(tmp, nil, 0o640); err != nil {
		b.Fatal(err)
	}
	if hold {
		return tmp
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".ready")); err != nil {
		b.Fatal(err)
	}
	return ""
}

type spooldRow struct {
	name          string
	inotify, poll float64
	unit          string
}

func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func BenchmarkSpoold(b *testing.B) {
	res := map[string]float64{}
	// The no-op runs' spools are removed at the end, not between runs:
	// see spooldBenchNoop.
	kept := b.TempDir()
	modes := []struct {
		name string
		args []string
	}{{"inotify", nil}, {"poll", []string{"--poll", spooldBenchPoll.String()}}}
	for _, m := range modes {
		b.Run(m.name+"/claim", func(b *testing.B) {
			p50, p99 := spooldBenchClaim(b, m.args)
			res[m.name+" p50"], res[m.name+" p99"] = p50, p99
		})
		for _, w := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/noop-workers-%d", m.name, w), func(b *testing.B) {
				res[fmt.Sprintf("%s jobs%d", m.name, w)] = spooldBenchNoop(b, kept, w, m.args)
			})
		}
	}
	b.Run("inotify/noop-workers-4-100k-queued", func(b *testing.B) {
		res["queued jobs4"] = spooldBenchDrain(b, kept, 4, spooldBenchQueued, spooldBenchNoopJobs, nil)
	})
	b.Run("rss", func(b *testing.B) {
		idle, queued, flat := spooldBenchRSS(b)
		res["idle"], res["queued"], res["flat"] = idle, queued, flat
	})
	rows := []spooldRow{
		{"submit-to-claim p50", res["inotify p50"], res["poll p50"], "ms"},
		{"submit-to-claim p99", res["inotify p99"], res["poll p99"], "ms"},
		{"no-op jobs/s, 1 worker", res["inotify jobs1"], res["poll jobs1"], "jobs/s"},
		{"no-op jobs/s, 4 workers", res["inotify jobs4"], res["poll jobs4"], "jobs/s"},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nspoold (separate process, logging on; poll = --poll %v)\n", spooldBenchPoll)
	fmt.Fprintf(&sb, "%-26s %12s %12s %10s\n", "", "inotify", "poll", "poll/inotify")
	for _, r := range rows {
		ratio := 0.0
		if r.inotify > 0 {
			ratio = r.poll / r.inotify
		}
		fmt.Fprintf(&sb, "%-26s %9.3f %-2s %9.3f %-2s %8.2fx\n", r.name, r.inotify, unitShort(r.unit), r.poll, unitShort(r.unit), ratio)
	}
	fmt.Fprintf(&sb, "%-26s %9.3f /s  (the first %d of %d queued; %.2fx the rate above)\n", "no-op jobs/s, 100k queued",
		res["queued jobs4"], spooldBenchNoopJobs, spooldBenchQueued, res["queued jobs4"]/max(res["inotify jobs4"], 1))
	fmt.Fprintf(&sb, "%-26s %9.1f MB\n", "RSS idle", res["idle"])
	fmt.Fprintf(&sb, "%-26s %9.1f MB\n", "RSS, 100,000 jobs queued", res["queued"])
	fmt.Fprintf(&sb, "%-26s %9.3f ms\n", "claim p50, 100,000 queued", res["flat"])
	fmt.Print(sb.String())
}

func unitShort(u string) string {
	if u == "jobs/s" {
		return "/s"
	}
	return u
}

// spooldWatchCreates watches dir; wait(name) returns once a file name is
// created in it, and fails after 10s without. The caller calls stop.
func spooldWatchCreates(b testing.TB, dir string) (wait func(name string), stop func()) {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		b.Fatal(err)
	}
	wait = func(name string) {
		for {
			select {
			case ev := <-w.Events:
				if filepath.Base(ev.Name) == name && ev.Has(fsnotify.Create) {
					return
				}
			case err := <-w.Errors:
				b.Fatal(err)
			case <-time.After(10 * time.Second):
				b.Fatalf("no %s after 10s", name)
			}
		}
	}
	return wait, func() { w.Close() }
}

// spooldBenchClaim measures, for one job at a time on an idle daemon, the
// time from the marker's rename into place to the claim's rename
// (<job>.running appearing), as inotify tells the benchmark.
func spooldBenchClaim(b *testing.B, args []string) (p50, p99 float64) {
	dir := newSpool(b)
	wait, closeWatch := spooldWatchCreates(b, dir)
	defer closeWatch()
	d := spooldStart(b, dir, args...)
	defer d.stop(b, 10*time.Second)
	// Measured from when spoold watches the root: its start is not a claim's.
	eventually(b, 10*time.Second, 5*time.Millisecond, "spoold to serve", func() bool {
		return strings.Contains(d.logText(), "serving")
	})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("claim-%06d", i)
		tmp := spooldQueue(b, dir, id, fmt.Sprintf("c%d", i%spooldBenchChats), true)
		t0 := time.Now()
		if err := os.Rename(tmp, filepath.Join(dir, id+".ready")); err != nil {
			b.Fatal(err)
		}
		wait(id + ".running")
		lat = append(lat, time.Since(t0))
		wait(id + ".done")
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 {
		return float64(lat[int(f*float64(len(lat)-1))]) / 1e6
	}
	p50, p99 = q(0.50), q(0.99)
	b.ReportMetric(p50, "p50_ms")
	b.ReportMetric(p99, "p99_ms")
	return p50, p99
}

// spooldBenchNoop queues b.N no-op argv jobs, then starts spoold and
// measures from its first claim until the last job has ended.
//
// The benchmark hears only renames into place (IN_MOVED_TO: the claims and
// the results), not every create, write and chmod of the tree as an
// fsnotify watch of the root would: on two cores a watcher reading some 20
// events per job competes with the daemon it measures, and nothing in a
// deployment watches the root that closely (watchd follows progress/).
//
// Each run's spool is left in kept, to be removed when the whole benchmark
// is over: on ext4 without a journal (this VM's disk) a new inode is not
// taken from those freed in the last 30 seconds or so, which the allocator
// checks one by one, so that removing the thousands of files of the run
// before (the benchmark's own cleanup, nothing spoold did) slows every
// file spoold creates in the next.
// spooldBenchNoopJobs is the fewest jobs a no-op run times.
const spooldBenchNoopJobs = 2000

// spooldBenchQueued is how many jobs wait in the queue of the row that
// shows the per-job cost does not grow with the queue: the first
// spooldBenchNoopJobs of them are timed.
const spooldBenchQueued = 100000

func spooldBenchNoop(b *testing.B, kept string, workers int, args []string) float64 {
	// At least spooldBenchNoopJobs a run: the default benchtime picks a few
	// hundred, a second's run, which measures the daemon's warm-up and
	// whatever the disk did just before rather than its rate.
	n := max(b.N, spooldBenchNoopJobs)
	return spooldBenchDrain(b, kept, workers, n, n, args)
}

// spooldBenchDrain queues queued no-op jobs and returns how many a second
// spoold ran, from its first claim to the n-th result.
func spooldBenchDrain(b *testing.B, kept string, workers, queued, n int, args []string) float64 {
	dir, err := os.MkdirTemp(kept, "noop-*")
	if err == nil {
		err = os.Chmod(dir, 0o750)
	}
	if err != nil {
		b.Fatal(err)
	}
	spooldBenchChatsExist(b, dir)
	for i := 0; i < queued; i++ {
		spooldQueue(b, dir, fmt.Sprintf("noop-%07d", i), fmt.Sprintf("c%d", i%spooldBenchChats), false)
	}
	// The setup's writes reach the disk before the timing starts, not
	// during it (beside spoold's fsyncs, which would wait for them).
	syscall.Sync()
	names := spooldRenamesInto(b, dir)
	b.ResetTimer()
	// From the first claim to the last result: the steady rate, without
	// the process's start and first scan.
	var t0 time.Time
	d := spooldStart(b, dir, append([]string{"--workers", strconv.Itoa(workers)}, args...)...)
	done := 0
	for done < n {
		select {
		case name, ok := <-names:
			if !ok {
				b.Fatal("inotify: read failed")
			}
			if t0.IsZero() && strings.HasSuffix(name, ".running") {
				t0 = time.Now()
			}
			if strings.HasSuffix(name, ".done") {
				done++
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("%d of %d jobs done after 30s of nothing", done, n)
		}
	}
	took := time.Since(t0)
	b.StopTimer()
	d.stop(b, 10*time.Second)
	rate := float64(n) / took.Seconds()
	b.ReportMetric(rate, "jobs/s")
	return rate
}

// spooldBenchChatsExist makes the chats' directories and lock files, as
// the first run of each conversation left them: the rate is that of a
// spool in use, where a chat's first job is the exception (with b.N of a
// few hundred, 64 first jobs would be a quarter of those timed).
func spooldBenchChatsExist(b *testing.B, dir string) {
	for c := 0; c < spooldBenchChats; c++ {
		d := filepath.Join(dir, "chats", fmt.Sprintf("c%d", c))
		if err := os.MkdirAll(d, 0o750); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "lock"), nil, 0o640); err != nil {
			b.Fatal(err)
		}
	}
}

// spooldRenamesInto watches dir for names renamed into it (IN_MOVED_TO
// only) and sends each name; the channel is closed if the read fails, or
// an overflow lost events. The watch ends with the benchmark.
func spooldRenamesInto(b *testing.B, dir string) <-chan string {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MOVED_TO); err != nil {
		syscall.Close(fd)
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	b.Cleanup(func() { f.Close() })
	out := make(chan string, 1<<16)
	go func() {
		defer close(out)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				off += syscall.SizeofInotifyEvent + int(ev.Len)
				if ev.Mask&syscall.IN_Q_OVERFLOW != 0 {
					return
				}
				if i := bytes.IndexByte(name, 0); i >= 0 {
					name = name[:i]
				}
				out <- string(name)
			}
		}
	}()
	return out
}

// spooldBenchRSS reads spoold's resident memory when idle, and with
// 100,000 jobs queued (their markers' time in the future, so that none
// runs and every one is held in the queue).
func spooldBenchRSS(b *testing.B) (idle, queued, flat float64) {
	for i := 0; i < b.N; i++ {
		dir := newSpool(b)
		d := spooldStart(b, dir)
		time.Sleep(500 * time.Millisecond) // the point: idle a while, then measured
		idle = rssMB(d.cmd.Process.Pid)
		d.stop(b, 10*time.Second)

		later := time.Now().Add(time.Hour)
		for j := 0; j < 100000; j++ {
			id := fmt.Sprintf("q-%07d", j)
			spooldQueue(b, dir, id, "c", false)
			os.Chtimes(filepath.Join(dir, id+".ready"), later, later)
		}
		d = spooldStart(b, dir)
		// Loaded when the resident size stops growing.
		last := 0.0
		for k := 0; k < 100; k++ {
			time.Sleep(200 * time.Millisecond) // the pace of the samples
			cur := rssMB(d.cmd.Process.Pid)
			if cur == last && cur > idle {
				break
			}
			last = cur
		}
		queued = last
		// The cost per job stays flat as the spool grows: claims with the
		// 100,000 waiting beside them.
		flat = spooldClaimLatency(b, dir, 200)
		d.stop(b, 10*time.Second)
	}
	b.ReportMetric(idle, "idle_MB")
	b.ReportMetric(queued, "queued_MB")
	b.ReportMetric(flat, "p50_ms_100k_queued")
	return idle, queued, flat
}

// spooldClaimLatency submits n jobs one at a time to the running spoold on
// dir and returns the median time from marker rename to claim.
func spooldClaimLatency(b *testing.B, dir string, n int) float64 {
	wait, closeWatch := spooldWatchCreates(b, dir)
	defer closeWatch()
	var lat []time.Duration
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("flat-%06d", i)
		tmp := spooldQueue(b, dir, id, fmt.Sprintf("f%d", i%spooldBenchChats), true)
		t0 := time.Now()
		if err := os.Rename(tmp, filepath.Join(dir, id+".ready")); err != nil {
			b.Fatal(err)
		}
		wait(id + ".running")
		lat = append(lat, time.Since(t0))
		wait(id + ".done")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(lat[len(lat)/2]) / 1e6
}
