package tests

// The dashboard and the alert rules of dist/, against the real Prometheus
// and node exporter of Debian (docs/operations.md, "Dashboard" and
// "Alerts"): every expression they hold is asked of Prometheus while jobs
// wait and after they ended, and must answer, and answer right.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// promSample is one series of an instant query's answer.
type promSample struct {
	labels map[string]string
	value  float64
}

// promQuery asks Prometheus at base for expr now.
func promQuery(base, expr string) ([]promSample, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", body.Status, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("value %q: %w", s, err)
		}
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out, nil
}

// promFiring is the names of the alerts firing now.
func promFiring(base string) (map[string]bool, error) {
	resp, err := http.Get(base + "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	firing := map[string]bool{}
	for _, a := range body.Data.Alerts {
		if a.State == "firing" {
			firing[a.Labels["alertname"]] = true
		}
	}
	return firing, nil
}

// promCheck judges one expression's answer: nil if right.
type promCheck func([]promSample) error

// promOne wants one series whose value ok accepts.
func promOne(what string, ok func(float64) bool) promCheck {
	return func(ss []promSample) error {
		if len(ss) != 1 {
			return fmt.Errorf("%d series, want one", len(ss))
		}
		if v := ss[0].value; math.IsNaN(v) || !ok(v) {
			return fmt.Errorf("%v, want %s", v, what)
		}
		return nil
	}
}

func promEq(want float64) promCheck {
	return promOne(fmt.Sprint(want), func(v float64) bool { return v == want })
}

func promAbove(low float64) promCheck {
	return promOne(fmt.Sprintf("over %v", low), func(v float64) bool { return v > low })
}

func promBetween(low, high float64) promCheck {
	return promOne(fmt.Sprintf("in (%v, %v)", low, high), func(v float64) bool { return v > low && v < high })
}

// promBy wants one series for each value of label named in want, each
// accepted by its own check.
func promBy(label string, want map[string]promCheck) promCheck {
	return func(ss []promSample) error {
		if len(ss) != len(want) {
			return fmt.Errorf("%d series, want %d (by %s)", len(ss), len(want), label)
		}
		for _, s := range ss {
			c := want[s.labels[label]]
			if c == nil {
				return fmt.Errorf("unexpected %s=%q", label, s.labels[label])
			}
			if err := c([]promSample{s}); err != nil {
				return fmt.Errorf("%s=%s: %w", label, s.labels[label], err)
			}
		}
		return nil
	}
}

// promEmpty wants no series: an alert's condition that does not hold.
func promEmpty(ss []promSample) error {
	if len(ss) != 0 {
		return fmt.Errorf("%d series (%v), want none", len(ss), ss[0].value)
	}
	return nil
}

// promUntil asks every expression of checks until each answers right, or
// fails the test after within with what each answered wrong.
func promUntil(t *testing.T, base, phase string, within time.Duration, checks map[string]promCheck, alerts map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var wrong []string
		for expr, check := range checks {
			ss, err := promQuery(base, expr)
			if err == nil {
				err = check(ss)
			}
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: %v", expr, err))
			}
		}
		firing, err := promFiring(base)
		if err != nil {
			wrong = append(wrong, fmt.Sprintf("/api/v1/alerts: %v", err))
		}
		for name, want := range alerts {
			if firing[name] != want {
				wrong = append(wrong, fmt.Sprintf("alert %s firing: %v, want %v", name, firing[name], want))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(wrong)
			t.Fatalf("%s: after %v, Prometheus answers wrong:\n%s", phase, within, strings.Join(wrong, "\n"))
		}
		time.Sleep(200 * time.Millisecond) // the poll of the wait: scrapes come every second
	}
}

// promDashboard is every query of the dashboard's panels.
func promDashboard(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// promRules is every alert's name and expression of the rules file, as
// promtool reads it (a rule's expr may be a YAML block).
var promRuleLine = regexp.MustCompile(`(?m)^\s*- alert: (\S+)\n\s*expr: (>-\n((?:\s{10}.*\n)+)|.*\n)`)

func promRules(t *testing.T, text string) map[string]string {
	t.Helper()
	rules := map[string]string{}
	for _, m := range promRuleLine.FindAllStringSubmatch(text, -1) {
		expr := strings.TrimSpace(m[2])
		if m[3] != "" {
			expr = strings.Join(strings.Fields(m[3]), " ")
		}
		rules[m[1]] = expr
	}
	if n := strings.Count(text, "- alert:"); n != len(rules) {
		t.Fatalf("read %d rules of %d", len(rules), n)
	}
	return rules
}

// TestOpsPrometheus runs the daemons under the real Prometheus, which
// scrapes watchd serve's and vmgate serve's /metrics and spoold's textfile
// through node exporter's textfile collector, with the shipped rules (their
// for: cut to a second). Jobs wait (one behind its chat's run, one for a
// worker, one for an answer), then end; every query of the dashboard and
// every rule's expression must answer, with the values the jobs make, and
// the unanswered question's alert must fire.
func TestOpsPrometheus(t *testing.T) {
	var paths []string
	for _, name := range []string{"prometheus", "promtool", "prometheus-node-exporter"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s is not installed (Debian's prometheus and prometheus-node-exporter; make test-deps installs them)", name)
		}
		paths = append(paths, p)
	}
	promBin, promtool, nodeBin := paths[0], paths[1], paths[2]
	rulesPath := filepath.Join("..", "dist", "prometheus", "vmspool.rules.yml")
	if out, err := exec.Command(promtool, "check", "rules", rulesPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesPath, err, out)
	}
	rulesText, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	rules := promRules(t, string(rulesText))
	dash := promDashboard(t, filepath.Join("..", "dist", "grafana", "vmspool.json"))

	work := t.TempDir()
	// The test's copy of the rules: each for: a second, so that an alert
	// fires at the second evaluation of its condition.
	forLine := regexp.MustCompile(`(?m)^(\s*for:\s*)\S+$`)
	if n := len(forLine.FindAllString(string(rulesText), -1)); n != len(rules) {
		t.Fatalf("%d for: lines for %d rules", n, len(rules))
	}
	testRules := filepath.Join(work, "rules.yml")
	os.WriteFile(testRules, forLine.ReplaceAll(rulesText, []byte("${1}1s")), 0o644)

	dir := newSpool(t)
	textDir := filepath.Join(work, "textfile")
	os.Mkdir(textDir, 0o755)
	// A floor under the free space but over half of it: spoold claims,
	// and the floor is near.
	sp, err := spool.SpaceOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	floor := sp.Free * 2 / 3
	opsStart(t, nil, "spoold", "--spool", dir, "--host", "h1", "--workers", "2",
		"--metrics-file", filepath.Join(textDir, "spoold.prom"), "--metrics-every", "300ms",
		"--min-free", strconv.FormatInt(floor, 10), "--min-free-percent", "0")
	watchd := strings.TrimPrefix(opsServeWatchd(t, dir), "http://")
	gate := opsFreeAddr(t)
	opsStart(t, nil, "vmgate", "serve", "--spool", dir, "--metrics-listen", gate)
	node := opsFreeAddr(t)
	startPath(t, os.Environ(), "node-exporter", nodeBin, "--web.listen-address="+node,
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+textDir)
	prom := opsFreeAddr(t)
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: vmspool-watchd
    static_configs: [{targets: [%q]}]
  - job_name: vmspool-vmgate
    static_configs: [{targets: [%q]}]
  - job_name: node
    static_configs: [{targets: [%q]}]
`, testRules, watchd, gate, node)
	configPath := filepath.Join(work, "prometheus.yml")
	os.WriteFile(configPath, []byte(config), 0o644)
	startPath(t, os.Environ(), "prometheus", promBin, "--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(work, "data"), "--web.listen-address="+prom, "--log.level=warn")
	base := "http://" + prom

	// Every target scraped, spoold's textfile among them, before any job:
	// its counters' rates then see the jobs' claims and ends.
	promUntil(t, base, "start", 20*time.Second, map[string]promCheck{
		`count(up == 1)`:                        promEq(3),
		`count(vmspool_spoold_jobs_queued)`:     promEq(1),
		`count(vmspool_gate_decisions_total)`:   promAbove(0),
		`count(vmspool_watchd_subscribers)`:     promEq(1),
		`count(vmspool_spoold_claims_total)`:    promEq(1),
		`count(vmspool_spoold_floor_bytes > 0)`: promEq(1),
	}, nil)

	s := openSpool(t, dir, 200)
	release := filepath.Join(work, "release")
	long := opsSubmit(t, dir, "pa", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done`, release)
	asks := opsSubmit(t, dir, "pq", "spool", "ask", "Go on?")
	eventually(t, 10*time.Second, 20*time.Millisecond, "both first jobs to run", func() bool {
		a, _ := s.State(long)
		b, _ := s.State(asks)
		return a == spool.Running && b == spool.Running
	})
	var jobs []string
	jobs = append(jobs, opsSubmit(t, dir, "pa", "true"))               // behind its chat's run
	jobs = append(jobs, opsSubmit(t, dir, "pe", "true"))               // for a worker
	jobs = append(jobs, opsSubmit(t, dir, "pf", "sh", "-c", "exit 3")) // fails

	// Each expression, while the jobs wait, then after they ended. Every
	// query of the dashboard and every rule must be here.
	// A quantile of no observation: one series, NaN (no run ended yet).
	none := func(ss []promSample) error {
		if len(ss) != 1 || !math.IsNaN(ss[0].value) {
			return fmt.Errorf("%v, want one series, NaN", ss)
		}
		return nil
	}
	zeroBy := func(label string, values ...string) promCheck {
		m := map[string]promCheck{}
		for _, v := range values {
			m[v] = promEq(0)
		}
		return promBy(label, m)
	}
	type both struct{ waiting, ended promCheck }
	checks := map[string]both{
		`max(vmspool_spoold_jobs_queued)`:                                                     {promEq(3), promEq(0)},
		`sum(vmspool_spoold_jobs_running)`:                                                    {promEq(2), promEq(0)},
		`max(vmspool_spoold_oldest_queued_job_age_seconds)`:                                   {promBetween(0, 60), promEq(0)},
		`sum(vmspool_spoold_jobs_waiting_answer)`:                                             {promEq(1), promEq(0)},
		`max(vmspool_spoold_oldest_question_age_seconds)`:                                     {promBetween(0, 60), promEq(0)},
		`histogram_quantile(0.5, sum by (le) (rate(vmspool_spoold_run_seconds_bucket[5m])))`:  {none, promAbove(0)},
		`histogram_quantile(0.95, sum by (le) (rate(vmspool_spoold_run_seconds_bucket[5m])))`: {none, promAbove(0)},
		`sum(rate(vmspool_spoold_claims_total[5m]))`:                                          {promAbove(0), promAbove(0)},
		`sum by (state) (rate(vmspool_spoold_jobs_ended_total[5m]))`: {zeroBy("state", "done", "failed", "cancelled"),
			promBy("state", map[string]promCheck{"done": promAbove(0), "failed": promAbove(0), "cancelled": promEq(0)})},
		`histogram_quantile(0.95, sum by (le) (rate(vmspool_spoold_claim_latency_seconds_bucket[5m])))`: {promAbove(0), promAbove(0)},
		`sum(increase(vmspool_spoold_jobs_ended_total{state="failed"}[1h]))`:                            {promEq(0), promAbove(0)},
		`sum(increase(vmspool_spoold_recoveries_total[1h]))`:                                            {promEq(0), promEq(0)},
		`sum(increase(vmspool_spoold_leases_lost_total[1h]))`:                                           {promEq(0), promEq(0)},
		`sum by (limit) (increase(vmspool_spoold_limit_hits_total[1h]))`: {zeroBy("limit", "log", "events", "event_rate"),
			zeroBy("limit", "log", "events", "event_rate")},
		`min(vmspool_spoold_spool_free_bytes)`:  {promAbove(float64(floor)), promAbove(float64(floor))},
		`max(vmspool_spoold_floor_bytes)`:       {promEq(float64(floor)), promEq(float64(floor))},
		`min(vmspool_spoold_spool_free_inodes)`: {promAbove(1000), promAbove(1000)},
		`max(vmspool_spoold_floor_inodes)`:      {promEq(1000), promEq(1000)},
		`time() - max by (host) (vmspool_spoold_heartbeat_timestamp_seconds)`: {promBy("host", map[string]promCheck{"h1": promBetween(-1, 10)}),
			promBy("host", map[string]promCheck{"h1": promBetween(-1, 10)})},
		`sum by (outcome) (rate(vmspool_gate_decisions_total[5m]))`: {promBy("outcome", map[string]promCheck{"allowed": promEq(0), "refused": promEq(0)}),
			promBy("outcome", map[string]promCheck{"allowed": promEq(0), "refused": promEq(0)})},
		`sum(vmspool_watchd_subscribers)`: {promEq(0), promEq(0)},
		// The rules' conditions: a question open, the floor near; no
		// queue older than ten minutes, no heartbeat stopped.
		rules["VmspoolQuestionUnanswered"]: {promEq(1), promEmpty},
		// Not below the floor, under twice it: the free bytes answer.
		rules["VmspoolFreeSpaceFloorNear"]:     {promAbove(float64(floor)), promAbove(float64(floor))},
		rules["VmspoolQueueStuck"]:             {promEmpty, promEmpty},
		rules["VmspoolSpooldHeartbeatStopped"]: {promEmpty, promEmpty},
	}
	var untested []string
	for _, e := range dash {
		if _, ok := checks[e]; !ok {
			untested = append(untested, "dashboard: "+e)
		}
	}
	for name, e := range rules {
		if _, ok := checks[e]; !ok || e == "" {
			untested = append(untested, "rule "+name+": "+e)
		}
	}
	if len(untested) > 0 {
		t.Fatalf("expressions this test does not check:\n%s", strings.Join(untested, "\n"))
	}
	waiting, ended := map[string]promCheck{}, map[string]promCheck{}
	for e, c := range checks {
		waiting[e], ended[e] = c.waiting, c.ended
	}
	promUntil(t, base, "jobs waiting", 15*time.Second, waiting, map[string]bool{
		"VmspoolQuestionUnanswered": true, "VmspoolFreeSpaceFloorNear": true,
		"VmspoolQueueStuck": false, "VmspoolSpooldHeartbeatStopped": false,
	})

	if out, err := exec.Command(bin("spool"), "--spool", dir, "answer", "--chat", "pq", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, out)
	}
	os.WriteFile(release, nil, 0o644)
	for _, j := range append(jobs, long, asks) {
		opsWaitEnded(t, s, j, 20*time.Second)
	}
	promUntil(t, base, "jobs ended", 15*time.Second, ended, map[string]bool{
		"VmspoolQuestionUnanswered": false, "VmspoolFreeSpaceFloorNear": true,
	})
}
