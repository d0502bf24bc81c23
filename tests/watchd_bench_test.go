package tests

// Benchmarks of watchd with the real binaries (make bench): how soon a
// flushed document reaches `watchd follow`'s output and an SSE client,
// with inotify and with --poll 1s (the old watcher's way) side by side,
// and what `watchd serve` costs with 1,000 subscribers over 100 chats.
// Each runs its measurement once, whatever b.N: the figures are
// percentiles reported as metrics, not ns/op.

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// watchdLatency measures, n times, the time from WriteProgress of a
// document with one more event until next returns that event's text. With
// jitter, each write waits a random time below it first, so that a poll's
// phase is not always the same.
func watchdLatency(b *testing.B, s *spool.Spool, p *spool.Progress, n int, jitter time.Duration, next func() string) []time.Duration {
	b.Helper()
	var lat []time.Duration
	for i := 0; i < n; i++ {
		if jitter > 0 {
			time.Sleep(rand.N(jitter)) // the point: events at random moments, as a run's
		} else {
			time.Sleep(time.Millisecond) // an idle machine between events
		}
		text := fmt.Sprintf("event %d", p.Seq+1)
		t0 := time.Now()
		p.Add(spool.Event{Seq: p.Seq + 1, At: spool.Now(), Type: spool.EventStatus, Text: text})
		if err := s.WriteProgress(p); err != nil {
			b.Fatal(err)
		}
		for {
			line := next()
			if line == text {
				break
			}
			if line == "" {
				b.Fatalf("output ended before %q", text)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func watchdPercentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

func watchdReport(b *testing.B, notify, poll []time.Duration) {
	n50, n99 := watchdPercentile(notify, 0.5), watchdPercentile(notify, 0.99)
	p50, p99 := watchdPercentile(poll, 0.5), watchdPercentile(poll, 0.99)
	b.ReportMetric(float64(n50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(n99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(p50.Microseconds()), "poll1s-p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "poll1s-p99-µs")
	b.ReportMetric(float64(p50)/float64(n50), "ratio-p50")
	b.Logf("inotify p50 %v p99 %v; --poll 1s p50 %v p99 %v; %.0fx sooner", n50, n99, p50, p99, float64(p50)/float64(n50))
}

const (
	watchdBenchSamples     = 300
	watchdBenchPollSamples = 12
)

// BenchmarkWatchdFollowLatency: a document flushed by the daemon, to the
// line on `watchd follow`'s stdout (a separate process, read from a pipe).
func BenchmarkWatchdFollowLatency(b *testing.B) {
	measure := func(poll bool) []time.Duration {
		dir := newSpool(b)
		s, err := spool.Create(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		args := []string{"follow", "--spool", dir, "--chat", "bench", "--job", "jbench"}
		n, jitter := watchdBenchSamples, time.Duration(0)
		if poll {
			args = append(args, "--poll", "1s")
			n, jitter = watchdBenchPollSamples, time.Second
		}
		cmd := exec.Command(bin("watchd"), args...)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		rd := bufio.NewReader(out)
		next := func() string {
			line, err := rd.ReadString('\n')
			if err != nil {
				return ""
			}
			return strings.TrimSuffix(line, "\n")
		}
		p := &spool.Progress{Job: "jbench", Chat: "bench", State: spool.Running}
		// The first document, to know the follower is up.
		watchdLatency(b, s, p, 1, 0, next)
		return watchdLatency(b, s, p, n, jitter, next)
	}
	watchdReport(b, measure(false), measure(true))
}

// BenchmarkWatchdSSELatency: a document flushed by the daemon, to the
// event read by a client of `watchd serve`'s GET /chats/C/events.
func BenchmarkWatchdSSELatency(b *testing.B) {
	measure := func(poll bool) []time.Duration {
		dir := newSpool(b)
		s, err := spool.Create(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		addrFile := dir + ".addr"
		args := []string{"serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--log-level", "warn"}
		n, jitter := watchdBenchSamples, time.Duration(0)
		if poll {
			args = append(args, "--poll", "1s")
			n, jitter = watchdBenchPollSamples, time.Second
		}
		startProc(b, raceEnv(), "watchd", args...)
		addr := watchdBenchAddr(b, addrFile, dir)
		resp, err := http.Get("http://" + addr + "/chats/bench/events?job=jbench")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		next := watchdSSETexts(resp.Body)
		p := &spool.Progress{Job: "jbench", Chat: "bench", State: spool.Running}
		watchdLatency(b, s, p, 1, 0, next)
		return watchdLatency(b, s, p, n, jitter, next)
	}
	watchdReport(b, measure(false), measure(true))
}

func watchdBenchAddr(b *testing.B, file, dir string) string {
	var addr string
	eventually(b, 20*time.Second, 5*time.Millisecond, "watchd serve to listen", func() bool {
		a, _ := os.ReadFile(file)
		addr = strings.TrimSpace(string(a))
		return addr != ""
	})
	serveRegister(b, dir, addr)
	return addr
}

// watchdSSETexts returns a func that returns the text of each next event
// of an SSE body that has one ("" at its end).
func watchdSSETexts(body io.Reader) func() string {
	r := newSSEReader(body)
	return func() string {
		for {
			ev, ok := r.next()
			if !ok {
				return ""
			}
			if t, ok := ev.text(); ok {
				return t
			}
		}
	}
}

// watchdProcStat returns a process's resident memory (bytes) and its CPU
// time used so far, from /proc.
func watchdProcStat(b *testing.B, pid int) (rss int64, cpu time.Duration) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return rss, time.Duration(ut+stt) * time.Second / clkTck
}

// BenchmarkWatchdServe1000: `watchd serve` with 1,000 SSE subscribers over
// 100 chats whose runs are going but quiet (each flushed every 5 s, as a
// running job's document is): resident memory, and CPU while idle.
func BenchmarkWatchdServe1000(b *testing.B) {
	const chats, perChat = 100, 10
	dir := newSpool(b)
	s, err := spool.Create(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	docs := make([]*spool.Progress, chats)
	for i := range docs {
		docs[i] = &spool.Progress{Job: fmt.Sprintf("job%03d", i), Chat: fmt.Sprintf("chat%03d", i), State: spool.Running}
		docs[i].Add(spool.Event{Seq: 1, At: spool.Now(), Type: spool.EventStatus, Text: "working"})
		if err := s.WriteProgress(docs[i]); err != nil {
			b.Fatal(err)
		}
	}
	addrFile := dir + ".addr"
	p := startProc(b, raceEnv(), "watchd", "serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--log-level", "warn")
	addr := watchdBenchAddr(b, addrFile, dir)
	_, cpu0 := watchdProcStat(b, p.cmd.Process.Pid)
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: chats * perChat, DisableCompression: true}
	client := &http.Client{Transport: tokenTransport{tr}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	bodies := make(chan io.Closer, chats*perChat)
	for i := 0; i < chats*perChat; i++ {
		d := docs[i%chats]
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get("http://" + addr + "/chats/" + d.Chat + "/events?job=" + d.Job)
			if err != nil || resp.StatusCode != 200 {
				b.Errorf("subscribe: %v %v", err, resp)
				return
			}
			bodies <- resp.Body
			next := watchdSSETexts(resp.Body)
			if next() == "working" {
				mu.Lock()
				got++
				mu.Unlock()
			}
			io.Copy(io.Discard, resp.Body)
		}()
	}
	eventually(b, 60*time.Second, 10*time.Millisecond, "every subscriber's first event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got == chats*perChat
	})
	_, cpu1 := watchdProcStat(b, p.cmd.Process.Pid)
	// Idle: each running job's document is flushed every 5 s, spread out.
	stop := make(chan struct{})
	var fw sync.WaitGroup
	fw.Add(1)
	go func() {
		defer fw.Done()
		tick := time.NewTicker(5 * time.Second / chats)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.WriteProgress(docs[i%chats])
			}
		}
	}()
	const idle = 10 * time.Second
	time.Sleep(idle) // the point: the idle time measured
	rss, cpu2 := watchdProcStat(b, p.cmd.Process.Pid)
	close(stop)
	fw.Wait()
	b.ReportMetric(float64(rss)/(1<<20), "RSS-MB")
	b.ReportMetric(100*float64(cpu2-cpu1)/float64(idle), "idle-CPU-%")
	b.ReportMetric(float64((cpu1 - cpu0).Milliseconds()), "connect-CPU-ms")
	b.Logf("1000 subscribers over 100 chats: RSS %.1f MB, idle CPU %.2f%% of a core over %v (a flush per chat every 5 s), %v CPU to connect them all",
		float64(rss)/(1<<20), 100*float64(cpu2-cpu1)/float64(idle), idle, cpu1-cpu0)
	close(bodies)
	for c := range bodies {
		c.Close()
	}
	wg.Wait()
}
