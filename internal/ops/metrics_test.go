package ops

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gauges an operator alerts on: read from the daemon's state at each
// gather, 0 before it is wired; the heartbeat one series a host.
func TestSpooldState(t *testing.T) {
	reg := NewRegistry("spoold", false)
	m := NewSpooldMetrics(reg)
	zero := `
# HELP vmspool_spoold_jobs_queued Jobs queued in the spool as this daemon knows them (claimable, backing off, or waiting behind their chat's run); every daemon of one spool sees the same queue.
# TYPE vmspool_spoold_jobs_queued gauge
vmspool_spoold_jobs_queued 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(zero), "vmspool_spoold_jobs_queued"); err != nil {
		t.Error(err)
	}
	m.Observe(func() SpooldState {
		return SpooldState{Queued: 3, OldestQueued: 90 * time.Second, Waiting: 1, OldestQuestion: -time.Second}
	})
	m.Alive("h1")
	m.Alive("h1")
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			got[mf.GetName()] = mt.GetGauge().GetValue()
		}
		if mf.GetName() == "vmspool_spoold_heartbeat_timestamp_seconds" && len(mf.GetMetric()) != 1 {
			t.Errorf("heartbeat has %d series, want 1", len(mf.GetMetric()))
		}
	}
	for name, want := range map[string]float64{
		"vmspool_spoold_jobs_queued":                   3,
		"vmspool_spoold_oldest_queued_job_age_seconds": 90,
		"vmspool_spoold_jobs_waiting_answer":           1,
		"vmspool_spoold_oldest_question_age_seconds":   0, // a clock behind counts as 0
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if hb := got["vmspool_spoold_heartbeat_timestamp_seconds"]; time.Since(time.Unix(int64(hb), 0)) > time.Minute {
		t.Errorf("heartbeat = %v, not now", hb)
	}
}

func TestSpooldMetrics(t *testing.T) {
	reg := NewRegistry("spoold", false)
	m := NewSpooldMetrics(reg)
	m.Claimed(20 * time.Millisecond)
	m.Claimed(-time.Second) // a marker stamped by a host whose clock runs ahead
	m.Started()
	m.Started()
	m.Ended("done", 2*time.Second)
	m.Stopped()
	m.Ended("weird", time.Second)
	m.Stopped()
	m.EndedUnstarted("failed")
	m.Recovered("requeued")
	m.Flushed()
	m.Flushed()
	m.Asked()
	m.Answered()
	m.LeaseLost()

	for _, tc := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.claims, 2},
		{m.running, 0},
		{m.ended.WithLabelValues("done"), 1},
		{m.ended.WithLabelValues("failed"), 1},
		{m.ended.WithLabelValues("cancelled"), 0},
		{m.ended.WithLabelValues("other"), 1},
		{m.recoveries.WithLabelValues("requeued"), 1},
		{m.recoveries.WithLabelValues("failed"), 0},
		{m.flushes, 2},
		{m.questions, 1},
		{m.answers, 1},
		{m.leaseLost, 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.c, got, tc.want)
		}
	}
	want := `
# HELP vmspool_spoold_claim_latency_seconds From a job's marker becoming claimable (its mtime: the submit, or the end of a backoff) to its claim.
# TYPE vmspool_spoold_claim_latency_seconds histogram
vmspool_spoold_claim_latency_seconds_bucket{le="0.001"} 1
vmspool_spoold_claim_latency_seconds_bucket{le="0.004"} 1
vmspool_spoold_claim_latency_seconds_bucket{le="0.016"} 1
vmspool_spoold_claim_latency_seconds_bucket{le="0.064"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="0.256"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="1.024"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="4.096"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="16.384"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="65.536"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="262.144"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="1048.576"} 2
vmspool_spoold_claim_latency_seconds_bucket{le="+Inf"} 2
vmspool_spoold_claim_latency_seconds_sum 0.02
vmspool_spoold_claim_latency_seconds_count 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vmspool_spoold_claim_latency_seconds"); err != nil {
		t.Error(err)
	}
	// Every series an operator alerts on exists before anything happened.
	if n := testutil.CollectAndCount(NewSpooldMetrics(prometheus.NewRegistry()).ended); n != 3 {
		t.Errorf("fresh jobs_ended_total has %d series, want 3 (done, failed, cancelled)", n)
	}
}

func TestNilMetricsAreNoOps(t *testing.T) {
	var s *SpooldMetrics
	s.Claimed(time.Second)
	s.Started()
	s.Stopped()
	s.Ended("done", time.Second)
	s.EndedUnstarted("failed")
	s.Recovered("requeued")
	s.LeaseLost()
	s.Flushed()
	s.Asked()
	s.Answered()
	var g *GateMetrics
	g.Decision(true, "", "", time.Millisecond)
	g.RequestError()
	var w *WatchdMetrics
	w.Subscribed()()
	w.Sent("status")
	h := http.NotFoundHandler()
	if w.Instrument("x", h) == nil {
		t.Fatal("nil WatchdMetrics.Instrument returned nil")
	}
}

func TestGateMetricsBoundTheirLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewGateMetrics(reg)
	m.Decision(true, "", "", time.Millisecond)
	m.Decision(false, "git-write", "push", time.Millisecond)
	m.Decision(false, "git-write", "push", time.Millisecond)
	m.Decision(false, "git-write", "my-alias-"+strings.Repeat("x", 100), 0)
	m.Decision(false, "undecidable", "", 0)
	m.Decision(false, "made-up", "", 0)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"allowed", "none", "none"}, 1},
		{[]string{"refused", "git-write", "push"}, 2},
		{[]string{"refused", "git-write", "other"}, 1},
		{[]string{"refused", "undecidable", "none"}, 1},
		{[]string{"refused", "other", "none"}, 1},
	} {
		if got := testutil.ToFloat64(m.decisions.WithLabelValues(tc.labels...)); got != tc.want {
			t.Errorf("decisions%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.took); n != 1 {
		t.Errorf("decision_seconds: %d series", n)
	}
}

func TestWatchdMetricsAndHandler(t *testing.T) {
	reg := NewRegistry("watchd", true)
	m := NewWatchdMetrics(reg)
	closeA := m.Subscribed()
	closeB := m.Subscribed()
	closeA()
	m.Sent("status")
	m.Sent("status")
	m.Sent("end")
	if got := testutil.ToFloat64(m.subscribers); got != 1 {
		t.Errorf("subscribers = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.subscribed); got != 2 {
		t.Errorf("subscriptions_total = %v, want 2", got)
	}
	closeB()

	mux := http.NewServeMux()
	mux.Handle("GET /chats/{chat}", m.Instrument("chat", http.NotFoundHandler()))
	mux.Handle("GET /metrics", MetricsHandler(reg))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for range 3 {
		resp, err := http.Get(srv.URL + "/chats/c1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`vmspool_watchd_subscribers 0`,
		`vmspool_watchd_events_sent_total{kind="status"} 2`,
		`vmspool_watchd_http_requests_total{code="404",route="chat"} 3`,
		`vmspool_build_info{daemon="watchd"`,
		`go_goroutines `,
		`process_start_time_seconds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "c1") {
		t.Error("/metrics names a chat id: a series per chat would grow without bound")
	}
}

func TestWriteTextfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "metrics")
	path := filepath.Join(dir, "spoold.prom")
	reg := NewRegistry("spoold", false)
	m := NewSpooldMetrics(reg)
	m.Started()
	m.Ended("done", time.Second)
	if err := WriteTextfile(path, reg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `vmspool_spoold_jobs_ended_total{state="done"} 1`) {
		t.Errorf("textfile lacks the ended job:\n%s", b)
	}
	if strings.Contains(string(b), "go_goroutines") {
		t.Error("textfile holds go_* series, which node_exporter already exposes")
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("textfile mode %v, want 0644 (node_exporter runs as another user)", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("textfile dir holds %d names, want 1 (no temporaries left)", len(ents))
	}
	if err := WriteTextfile(filepath.Join(dir, "spoold.txt"), reg); err == nil {
		t.Error("a textfile not named *.prom was written; node_exporter would never read it")
	}
}

func TestWriteTextfileLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spoold.prom")
	reg := NewRegistry("spoold", false)
	m := NewSpooldMetrics(reg)
	ctx, cancel := contextWithCancel(t)
	done := make(chan struct{})
	go func() {
		WriteTextfileLoop(ctx, reg, path, 10*time.Millisecond, func(err error) { t.Error(err) })
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), "vmspool_spoold_claims_total 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no textfile after 5s: %q", b)
		}
		time.Sleep(5 * time.Millisecond) // the poll of the wait
	}
	m.Claimed(time.Millisecond)
	cancel()
	<-done
	// The last write happens at stop, so the file holds the final count.
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "vmspool_spoold_claims_total 1") {
		t.Errorf("textfile after stop:\n%s", b)
	}
}

func TestWriteTextfileLoopReportsEachErrorOnce(t *testing.T) {
	ro := filepath.Join(t.TempDir(), "file")
	os.WriteFile(ro, nil, 0o644)
	path := filepath.Join(ro, "spoold.prom") // its directory is a file
	ctx, cancel := contextWithCancel(t)
	var n int
	done := make(chan struct{})
	go func() {
		WriteTextfileLoop(ctx, NewRegistry("spoold", false), path, time.Millisecond, func(error) { n++ })
		close(done)
	}()
	time.Sleep(50 * time.Millisecond) // the point: a window of about 50 tries, of which only the first may report
	cancel()
	<-done
	if n != 1 {
		t.Errorf("the same error was reported %d times, want once", n)
	}
}
