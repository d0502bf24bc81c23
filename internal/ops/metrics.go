package ops

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets of the histograms. Claims are taken in milliseconds when a
// worker is free and wait minutes behind a full queue; jobs run from a
// second to hours (an agent's timeout is 45 minutes by default).
var (
	claimBuckets = prometheus.ExponentialBuckets(0.001, 4, 11) // 1 ms .. 17 min
	runBuckets   = prometheus.ExponentialBuckets(0.1, 3, 12)   // 0.1 s .. 4.9 h
	gateBuckets  = prometheus.ExponentialBuckets(0.0001, 4, 9) // 0.1 ms .. 6.5 s
)

// The label values a metric may take. Whatever else a caller passes is
// counted as "other", so that a bug or a hostile input cannot grow a
// series per value.
var (
	finalStates     = []string{"done", "failed", "cancelled"}
	recoveryActions = []string{"requeued", "failed"}
	limitKinds      = []string{"log", "events", "event_rate"}
)

func oneOf(v string, allowed []string) string {
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	return "other"
}

// SpooldMetrics are what spoold counts: the queue's throughput and
// latency, and how often it had to recover a dead worker's job.
type SpooldMetrics struct {
	claims       prometheus.Counter
	claimLatency prometheus.Histogram
	ended        *prometheus.CounterVec
	runTime      *prometheus.HistogramVec
	running      prometheus.Gauge
	recoveries   *prometheus.CounterVec
	leaseLost    prometheus.Counter
	flushes      prometheus.Counter
	questions    prometheus.Counter
	answers      prometheus.Counter
	limitHits    *prometheus.CounterVec
	freeBytes    prometheus.Gauge
	freeInodes   prometheus.Gauge
	belowFloor   prometheus.Gauge
	floorBytes   prometheus.Gauge
	floorInodes  prometheus.Gauge
	heartbeat    *prometheus.GaugeVec
	state        *stateCollector
}

// NewSpooldMetrics registers spoold's metrics with reg.
func NewSpooldMetrics(reg prometheus.Registerer) *SpooldMetrics {
	const sub = "spoold"
	m := &SpooldMetrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "claims_total",
			Help: "Jobs this daemon claimed (attempts started, recovered ones included).",
		}),
		claimLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "claim_latency_seconds",
			Help:    "From a job's marker becoming claimable (its mtime: the submit, or the end of a backoff) to its claim.",
			Buckets: claimBuckets,
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "jobs_ended_total",
			Help: "Jobs this daemon ended, by final state.",
		}, []string{"state"}),
		runTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "run_seconds",
			Help:    "Run time of an attempt, from its start to its end, by final state.",
			Buckets: runBuckets,
		}, []string{"state"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "jobs_running",
			Help: "Jobs this daemon runs now.",
		}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "recoveries_total",
			Help: "Jobs of dead workers this daemon took over, by what it did: requeued, or failed (no attempts left).",
		}, []string{"action"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "leases_lost_total",
			Help: "Jobs this daemon stopped because another daemon had taken them over (its heartbeat came too late).",
		}),
		flushes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "progress_flushes_total",
			Help: "Progress documents written (progress/<chat> replaced).",
		}),
		questions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "questions_total",
			Help: "Questions jobs asked.",
		}),
		answers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "answers_total",
			Help: "Answers relayed to the jobs that asked.",
		}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "limit_hits_total",
			Help: "Times a job reached one of its limits: log (the log was cut), events (the job was ended), event_rate (events were not relayed).",
		}, []string{"limit"}),
		freeBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "spool_free_bytes",
			Help: "Free bytes of the spool's filesystem, as last checked.",
		}),
		freeInodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "spool_free_inodes",
			Help: "Free inodes of the spool's filesystem, as last checked.",
		}),
		belowFloor: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "below_floor",
			Help: "1 while the spool's free space is below the floor and no job is claimed, else 0.",
		}),
		floorBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "floor_bytes",
			Help: "The free-space floor in bytes: the larger of --min-free and --min-free-percent of the filesystem's size (0: none).",
		}),
		floorInodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "floor_inodes",
			Help: "The floor of free inodes, --min-free-inodes (0: none).",
		}),
		heartbeat: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "heartbeat_timestamp_seconds",
			Help: "Unix time of this daemon's last heartbeat (its loop's tick, every second), by host (--host: one series a daemon).",
		}, []string{"host"}),
		state: newStateCollector(),
	}
	reg.MustRegister(m.claims, m.claimLatency, m.ended, m.runTime, m.running,
		m.recoveries, m.leaseLost, m.flushes, m.questions, m.answers,
		m.limitHits, m.freeBytes, m.freeInodes, m.belowFloor, m.floorBytes, m.floorInodes, m.heartbeat, m.state)
	for _, k := range limitKinds {
		m.limitHits.WithLabelValues(k)
	}
	// Every series exists from the start at 0, so that rate() and alerts
	// see the first job end rather than a series appearing.
	for _, st := range finalStates {
		m.ended.WithLabelValues(st)
		m.runTime.WithLabelValues(st)
	}
	for _, a := range recoveryActions {
		m.recoveries.WithLabelValues(a)
	}
	return m
}

// Claimed counts a claim; waited is how long the marker was claimable
// before it (negative values, from clocks of two hosts, count as 0).
func (m *SpooldMetrics) Claimed(waited time.Duration) {
	if m == nil {
		return
	}
	m.claims.Inc()
	m.claimLatency.Observe(max(waited, 0).Seconds())
}

// Started counts an attempt as running; Stopped, however the attempt's
// run ended (a result, a requeue, a lost lease), counts it out again.
func (m *SpooldMetrics) Started() {
	if m == nil {
		return
	}
	m.running.Inc()
}

// Stopped pairs with Started.
func (m *SpooldMetrics) Stopped() {
	if m == nil {
		return
	}
	m.running.Dec()
}

// Ended counts an attempt that ended in state (done, failed, cancelled)
// after running for ran.
func (m *SpooldMetrics) Ended(state string, ran time.Duration) {
	if m == nil {
		return
	}
	st := oneOf(state, finalStates)
	m.ended.WithLabelValues(st).Inc()
	m.runTime.WithLabelValues(st).Observe(max(ran, 0).Seconds())
}

// EndedUnstarted counts a job this daemon ended without running it: a
// spec that does not parse, a cancel of a queued job, a dead worker's job
// with no attempt left (which Recovered counts too).
func (m *SpooldMetrics) EndedUnstarted(state string) {
	if m == nil {
		return
	}
	m.ended.WithLabelValues(oneOf(state, finalStates)).Inc()
}

// Recovered counts a dead worker's job taken over: action is "requeued" or
// "failed".
func (m *SpooldMetrics) Recovered(action string) {
	if m == nil {
		return
	}
	m.recoveries.WithLabelValues(oneOf(action, recoveryActions)).Inc()
}

// LeaseLost counts a job stopped because its lease was taken over.
func (m *SpooldMetrics) LeaseLost() {
	if m == nil {
		return
	}
	m.leaseLost.Inc()
}

// Flushed counts one progress document written.
func (m *SpooldMetrics) Flushed() {
	if m == nil {
		return
	}
	m.flushes.Inc()
}

// Asked counts a question a job asked.
func (m *SpooldMetrics) Asked() {
	if m == nil {
		return
	}
	m.questions.Inc()
}

// LimitHit counts a job reaching one of its limits (log, events,
// event_rate).
func (m *SpooldMetrics) LimitHit(kind string) {
	if m == nil {
		return
	}
	m.limitHits.WithLabelValues(oneOf(kind, limitKinds)).Inc()
}

// Space records the spool's free space, the floor (floorBytes already
// taking the percentage into account), and whether it is below the floor.
func (m *SpooldMetrics) Space(freeBytes, freeInodes, floorBytes, floorInodes int64, below bool) {
	if m == nil {
		return
	}
	m.freeBytes.Set(float64(freeBytes))
	m.freeInodes.Set(float64(freeInodes))
	m.floorBytes.Set(float64(floorBytes))
	m.floorInodes.Set(float64(floorInodes))
	v := 0.0
	if below {
		v = 1
	}
	m.belowFloor.Set(v)
}

// Answered counts an answer relayed to a job.
func (m *SpooldMetrics) Answered() {
	if m == nil {
		return
	}
	m.answers.Inc()
}

// GateMetrics are what vmgate counts: its decisions, why, and on which git
// subcommand.
type GateMetrics struct {
	decisions *prometheus.CounterVec
	took      prometheus.Histogram
	errors    prometheus.Counter
}

// Outcomes of a gate decision.
const (
	Allowed = "allowed"
	Refused = "refused"
)

var (
	gateOutcomes = []string{Allowed, Refused}
	gateReasons  = []string{"none", "git-write", "undecidable", "parse-error", "policy"}
	// gitWrites are the git subcommands the gate may name as a script's
	// first write; any other name (an alias, a typo) is counted as other.
	gitWrites = []string{"none", "add", "am", "apply", "branch", "checkout", "cherry-pick", "clean",
		"clone", "commit", "commit-tree", "config", "fetch", "filter-branch", "gc", "init", "merge",
		"mv", "notes", "prune", "pull", "push", "rebase", "reflog", "remote", "repack", "replace",
		"reset", "restore", "revert", "rm", "stash", "submodule", "switch", "symbolic-ref", "tag",
		"update-index", "update-ref", "worktree", "write-tree", "read-tree", "hash-object", "lfs",
		"bisect", "sparse-checkout", "maintenance", "fast-import", "mktag", "mktree", "pack-refs"}
)

// NewGateMetrics registers vmgate's metrics with reg.
func NewGateMetrics(reg prometheus.Registerer) *GateMetrics {
	const sub = "gate"
	m := &GateMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "decisions_total",
			Help: "Scripts decided, by outcome (allowed, refused), reason (none when allowed) and the first git write (none when there is none).",
		}, []string{"outcome", "reason", "git"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "decision_seconds",
			Help:    "Time to decide one script, from reading the request to writing the verdict.",
			Buckets: gateBuckets,
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "request_errors_total",
			Help: "Requests that could not be read or answered (moved aside, or left for a retry).",
		}),
	}
	reg.MustRegister(m.decisions, m.took, m.errors)
	m.decisions.WithLabelValues(Allowed, "none", "none")
	m.decisions.WithLabelValues(Refused, "git-write", "none")
	return m
}

// Decision counts one verdict. reason and git are empty when the verdict
// has none (an allowed script, a refusal that is not a git write).
func (m *GateMetrics) Decision(allowed bool, reason, git string, took time.Duration) {
	if m == nil {
		return
	}
	outcome := Refused
	if allowed {
		outcome = Allowed
	}
	if reason == "" {
		reason = "none"
	}
	if git == "" {
		git = "none"
	}
	m.decisions.WithLabelValues(outcome, oneOf(reason, gateReasons), oneOf(git, gitWrites)).Inc()
	if took > 0 {
		m.took.Observe(took.Seconds())
	}
}

// RequestError counts a request that could not be decided or answered.
func (m *GateMetrics) RequestError() {
	if m == nil {
		return
	}
	m.errors.Inc()
}

// WatchdMetrics are what watchd serve counts: who listens, and what it
// relayed to them.
type WatchdMetrics struct {
	subscribers prometheus.Gauge
	subscribed  prometheus.Counter
	sent        *prometheus.CounterVec
	requests    *prometheus.CounterVec
}

// The kinds of server-sent events watchd relays.
var sseKinds = []string{"progress", "status", "end", "ping"}

// NewWatchdMetrics registers watchd's metrics with reg.
func NewWatchdMetrics(reg prometheus.Registerer) *WatchdMetrics {
	const sub = "watchd"
	m := &WatchdMetrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "subscribers",
			Help: "Event streams (GET .../events) open now.",
		}),
		subscribed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "subscriptions_total",
			Help: "Event streams opened since start.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "events_sent_total",
			Help: "Server-sent events written to subscribers, by kind.",
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
	}
	reg.MustRegister(m.subscribers, m.subscribed, m.sent, m.requests)
	return m
}

// Subscribed counts a new event stream; call the returned func when it
// closes.
func (m *WatchdMetrics) Subscribed() (closed func()) {
	if m == nil {
		return func() {}
	}
	m.subscribed.Inc()
	m.subscribers.Inc()
	return m.subscribers.Dec
}

// Sent counts one server-sent event of kind (progress, status, end, ping).
func (m *WatchdMetrics) Sent(kind string) {
	if m == nil {
		return
	}
	m.sent.WithLabelValues(oneOf(kind, sseKinds)).Inc()
}
