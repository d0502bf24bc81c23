package ops

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Service is what a daemon's main wires to whoever runs it, in one piece:
// systemd's readiness, stopping and watchdog notices, and the daemon's
// metrics (a registry, written as a node_exporter textfile or served over
// HTTP). A daemon not started by systemd gets the same calls, which then
// send nothing. Failures to notify are logged once each and never stop the
// daemon.
type Service struct {
	// Registry holds the daemon's metrics.
	Registry *prometheus.Registry

	notifier *Notifier
	log      logrus.FieldLogger
}

// NewService makes the service of the daemon name. runtime adds the Go
// runtime's and the process's collectors (a daemon whose metrics are
// scraped live; a textfile's would be stale by the time they are read).
func NewService(name string, runtime bool, log logrus.FieldLogger) *Service {
	return &Service{Registry: NewRegistry(name, runtime), notifier: NewNotifier(), log: log}
}

// Ready says start-up is done.
func (s *Service) Ready() {
	if err := s.notifier.Ready(); err != nil {
		s.log.WithError(err).Warn("cannot tell systemd we are ready")
	}
}

// Stopping says the daemon is shutting down.
func (s *Service) Stopping() {
	if err := s.notifier.Stopping(); err != nil {
		s.log.WithError(err).Warn("cannot tell systemd we are stopping")
	}
}

// Watchdog pings systemd's watchdog until ctx is done, while every check
// passes (DirHealth, Pulse.Within): a daemon whose spool hangs or whose
// loop is stuck is restarted rather than kept looking alive.
func (s *Service) Watchdog(ctx context.Context, checks ...func() error) {
	healthy := func() error {
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := s.notifier.StartWatchdog(ctx, healthy); err != nil {
		s.log.WithError(err).Warn("no watchdog")
	}
}

// Textfile writes the metrics through write every `every` until the
// returned stop, which writes them a last time (the final counts, after
// the jobs ended) and returns once written. A nil write writes nothing.
func (s *Service) Textfile(write TextfileWriter, every time.Duration) (stop func()) {
	if write == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		TextfileLoop(ctx, s.Registry, write, every, func(err error) {
			s.log.WithError(err).Warn("cannot write the metrics textfile")
		})
	}()
	return func() { cancel(); <-done }
}

// ServeMetrics serves GET /metrics on addr until the returned stop.
func (s *Service) ServeMetrics(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(s.Registry))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
