package ops

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SpooldState is what spoold knows at one moment of its queue and of its
// runs: the gauges an operator alerts on. spoold computes it from what it
// holds in memory (its queue, its runs), never from a read of the tree.
type SpooldState struct {
	// Queued counts the jobs queued in the spool as this daemon knows
	// them: claimable, backing off, or waiting behind their chat's run.
	Queued int
	// OldestQueued is how long the oldest of them that waits for a worker
	// has been claimable (0: none does). A job waiting behind its chat's
	// run is counted in Queued but not timed here: it waits for its
	// chat, not for a worker.
	OldestQueued time.Duration
	// Waiting counts this daemon's runs with a question open.
	Waiting int
	// OldestQuestion is the age of the oldest of those questions (0:
	// none).
	OldestQuestion time.Duration
}

// stateCollector reads a SpooldState at each gather (a textfile write,
// every 15 s) through the function Observe set.
type stateCollector struct {
	state                          atomic.Pointer[func() SpooldState]
	queued, oldest, waiting, asked *prometheus.Desc
}

func newStateCollector() *stateCollector {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "spoold", n) }
	return &stateCollector{
		queued: prometheus.NewDesc(name("jobs_queued"),
			"Jobs queued in the spool as this daemon knows them (claimable, backing off, or waiting behind their chat's run); every daemon of one spool sees the same queue.", nil, nil),
		oldest: prometheus.NewDesc(name("oldest_queued_job_age_seconds"),
			"How long the oldest queued job that waits for a worker has been claimable (since its submit, or the end of its backoff); 0 when none does. Jobs waiting behind their chat's run are not timed.", nil, nil),
		waiting: prometheus.NewDesc(name("jobs_waiting_answer"),
			"Jobs this daemon runs that wait for a person's answer (a question open).", nil, nil),
		asked: prometheus.NewDesc(name("oldest_question_age_seconds"),
			"Age of the oldest question a job of this daemon asked and has had no answer to; 0 when none is open.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.oldest
	ch <- c.waiting
	ch <- c.asked
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var s SpooldState
	if f := c.state.Load(); f != nil {
		s = (*f)()
	}
	g := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	g(c.queued, float64(s.Queued))
	g(c.oldest, max(s.OldestQueued, 0).Seconds())
	g(c.waiting, float64(s.Waiting))
	g(c.asked, max(s.OldestQuestion, 0).Seconds())
}

// Observe makes the gauges of the queue and the questions read state at
// each gather. Until it is called they are 0.
func (m *SpooldMetrics) Observe(state func() SpooldState) {
	if m == nil {
		return
	}
	m.state.state.Store(&state)
}

// Alive records now as the last heartbeat of the daemon of host: its
// ticking loop, which also checks the spool's free space, is going.
func (m *SpooldMetrics) Alive(host string) {
	if m == nil {
		return
	}
	m.heartbeat.WithLabelValues(host).SetToCurrentTime()
}
