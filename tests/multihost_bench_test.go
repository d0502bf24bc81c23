package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// BenchmarkMultiHost measures each engine of the many-hosts proof
// (scripts/engines/) with the proof's settings (mhArgs: --poll 200ms,
// --workers 2): submit-to-start, a job submitted on the file server's side
// until it starts on an idle host (the job records its start outside the
// spool); and the throughput of no-op jobs with 1, 2 and 3 hosts. Every
// host shares this machine's cores, so more hosts add workers and links,
// not CPU. It runs once whatever the benchtime, and skips an engine that
// cannot start, as the tests do.
func BenchmarkMultiHost(b *testing.B) {
	for _, engine := range mhEngines {
		b.Run(engine, func(b *testing.B) {
			c := mhStart(b, engine)
			p50, p90 := mhBenchLatency(b, c, 20)
			b.ReportMetric(p50, "start_p50_ms")
			b.ReportMetric(p90, "start_p90_ms")
			for hosts := 1; hosts <= 3; hosts++ {
				b.ReportMetric(mhBenchThroughput(b, c, hosts, 200), fmt.Sprintf("jobs/s_%dhost", hosts))
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// mhBenchLatency submits n jobs one at a time to an idle host and returns
// the median and 90th percentile of submit-to-start, in ms.
func mhBenchLatency(b *testing.B, c *mhCluster, n int) (p50, p90 float64) {
	h := c.spooldHost("lat", "h1", nil, mhArgs...)
	defer h.stop()
	var waits []float64
	for i := 0; i <= n; i++ {
		time.Sleep(300 * time.Millisecond)         // the host idle between jobs, as between messages
		if w := c.submitToStart(b, "lat"); i > 0 { // the first warms the mount
			waits = append(waits, float64(w.Microseconds())/1000)
		}
	}
	slices.Sort(waits)
	return waits[len(waits)/2], waits[len(waits)*9/10]
}

// mhBenchThroughput runs n no-op jobs of 64 chats on the given number of
// hosts and returns jobs a second, from the moment the jobs may be
// claimed to the last result. The jobs are submitted into a staging
// directory of the volume with a not-before time a few seconds ahead,
// then renamed into a fresh spool the hosts already serve: every host
// sees them all before any may start.
func mhBenchThroughput(b *testing.B, c *mhCluster, hosts, n int) float64 {
	run := fmt.Sprintf("bench-%d", hosts)
	dir := filepath.Join(c.export, run)
	stage := filepath.Join(c.export, run+"-stage")
	for _, d := range []string{dir, stage} {
		s, err := spool.Create(d)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	var hs []*mhHost
	for i := 1; i <= hosts; i++ {
		name, slot := fmt.Sprintf("t%d-%d", hosts, i), fmt.Sprintf("h%d", i)
		spoolDir := filepath.Join(c.dir, "mnt-"+name, run)
		hs = append(hs, c.spooldHost(name, slot, nil, append([]string{"--spool", spoolDir}, mhArgs...)...))
	}
	defer func() {
		for _, h := range hs {
			h.stop()
		}
	}()
	var lines strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&lines, `{"chat":"c%02d","argv":["true"]}`+"\n", i%64)
	}
	batch := filepath.Join(c.dir, run+".jsonl")
	if err := os.WriteFile(batch, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := command(raceEnv(), "spool", "--spool", stage, "submit", "--batch", batch)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("spool submit --batch: %v: %s", err, stderr.String())
	}
	ids := strings.Fields(string(out))
	if len(ids) != n {
		b.Fatalf("spool submit --batch gave %d ids; want %d", len(ids), n)
	}
	// Whole seconds: sftp carries no more.
	at := time.Now().Add(2*time.Second + time.Duration(n)*10*time.Millisecond).Truncate(time.Second).Add(time.Second)
	for _, id := range ids {
		if err := os.Chtimes(filepath.Join(stage, id+spool.ExtReady), at, at); err != nil {
			b.Fatal(err)
		}
		for _, ext := range []string{spool.ExtSpec, spool.ExtReady} {
			if err := os.Rename(filepath.Join(stage, id+ext), filepath.Join(dir, id+ext)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if time.Now().After(at) {
		b.Fatalf("the jobs were moved into place only after their not-before time")
	}
	s, err := spool.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for {
		jobs, _, err := s.Scan()
		if err != nil {
			b.Fatal(err)
		}
		ended := 0
		for _, f := range jobs {
			if st, _ := f.State(); st.Final() {
				ended++
			}
		}
		if ended >= n {
			break
		}
		if time.Since(at) > 5*time.Minute {
			b.Fatalf("%d of %d jobs ended after 5m", ended, n)
		}
		time.Sleep(50 * time.Millisecond) // the poll of the wait
	}
	return float64(n) / time.Since(at).Seconds()
}
