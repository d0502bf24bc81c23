package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTextfileEvery is how often spoold rewrites its textfile: often
// enough for a 15 s..60 s scrape interval, rarely enough to cost nothing.
const DefaultTextfileEvery = 15 * time.Second

// WriteTextfile writes g's metrics to path for node_exporter's textfile
// collector, by prometheus.WriteToTextfile: a temporary in path's
// directory (named path plus digits, which the collector ignores since it
// reads only *.prom), mode 0644, renamed over path, so that node_exporter
// never reads half a file. path must end in .prom; its directory is made
// (0755) if missing.
func WriteTextfile(path string, g prometheus.Gatherer) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("metrics textfile %s: name must end in .prom (node_exporter reads only those)", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	if err := prometheus.WriteToTextfile(path, g); err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	return nil
}

// WriteTextfileLoop writes the textfile now, then every `every`, until ctx
// is done, and once more then, so that the file holds the last counts of a
// daemon that stopped. Errors do not stop the loop (a full disk must not
// take the daemon down); each new one is passed to report (which may be
// nil) once, not at every tick, so that the log says what happened rather
// than repeating it.
func WriteTextfileLoop(ctx context.Context, g prometheus.Gatherer, path string, every time.Duration, report func(error)) {
	if every <= 0 {
		every = DefaultTextfileEvery
	}
	last := ""
	write := func() {
		err := WriteTextfile(path, g)
		switch {
		case err == nil:
			last = ""
		case err.Error() != last:
			last = err.Error()
			if report != nil {
				report(err)
			}
		}
	}
	write()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-t.C:
			write()
		}
	}
}
