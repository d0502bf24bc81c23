package ops

import (
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the project.
const Namespace = "vmspool"

// NewRegistry returns the registry of one daemon, holding
// vmspool_build_info{daemon,version,revision}. With runtime, it also holds
// the Go runtime's and the process's collectors (go_*, process_*), which a
// daemon that serves /metrics exposes; a registry written as a
// node_exporter textfile must not hold them, since node_exporter exposes
// its own go_* and process_* series and refuses a textfile that repeats
// them.
func NewRegistry(daemon string, runtime bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	version, revision := buildVersion()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Always 1; the labels say which daemon runs which build.",
		ConstLabels: prometheus.Labels{"daemon": daemon, "version": version, "revision": revision},
	})
	info.Set(1)
	reg.MustRegister(info)
	if runtime {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return reg
}

// buildVersion reads the module version and VCS revision the binary was
// built with ("(devel)" and "" when the build knows none).
func buildVersion() (version, revision string) {
	version = "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return version, revision
}

// MetricsHandler serves reg in the Prometheus exposition format, for a
// daemon's GET /metrics. A collector's error is logged by Prometheus'
// scrape as a failed scrape rather than hidden in a partial answer.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg, // counts promhttp_metric_handler_errors_total
		ErrorHandling:     promhttp.HTTPErrorOnError,
		EnableOpenMetrics: true,
	})
}

// Instrument counts h's answers in vmspool_watchd_http_requests_total
// under route (a fixed name such as "chat" or "events", never the request's
// path, whose chat ids would make a series each).
func (m *WatchdMetrics) Instrument(route string, h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	return promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(prometheus.Labels{"route": route}), h)
}
