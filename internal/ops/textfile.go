package ops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTextfileEvery is how often spoold rewrites its textfile: often
// enough for a 15 s..60 s scrape interval, rarely enough to cost nothing.
const DefaultTextfileEvery = 15 * time.Second

// Modes of a textfile read by node_exporter from a directory of its own
// (the unit's /var/lib/vmspool/metrics): anyone may read it. A textfile
// kept under the spool takes the tree's modes instead (spool.FileMode,
// 0640): only the spool's group reads it.
const PublicTextfileMode os.FileMode = 0o644

// WriteTextfile writes g's metrics to path with mode PublicTextfileMode.
func WriteTextfile(path string, g prometheus.Gatherer) error {
	return WriteTextfileMode(path, g, PublicTextfileMode)
}

// WriteTextfileMode writes g's metrics to path for node_exporter's textfile
// collector, by prometheus.WriteToTextfile into a temporary in path's
// directory (named path plus digits, which the collector ignores since it
// reads only *.prom), which is given mode and then renamed over path:
// node_exporter never reads half a file, nor one with another mode. path
// must end in .prom; its directory is made if missing, with mode plus the
// search bit of each reader (0640 gives 0750). Modes are set whatever the
// umask.
func WriteTextfileMode(path string, g prometheus.Gatherer, mode os.FileMode) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("metrics textfile %s: name must end in .prom (node_exporter reads only those)", path)
	}
	dir := filepath.Dir(path)
	dirMode := mode.Perm() | (mode.Perm()&0o444)>>2
	_, serr := os.Lstat(dir)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	if errors.Is(serr, fs.ErrNotExist) {
		// MkdirAll obeys the umask; a directory made here does not. One
		// that was there is the operator's, and keeps its mode.
		if err := os.Chmod(dir, dirMode); err != nil {
			return fmt.Errorf("metrics textfile %s: %w", path, err)
		}
	}
	// WriteToTextfile gives its file 0644: it writes a temporary of ours,
	// which gets the mode before it takes path's name. The temporary is
	// named by the pid, not at random, so that a failure repeats the same
	// message (the loop reports each new one once).
	tmp := path + strconv.Itoa(os.Getpid())
	if err := prometheus.WriteToTextfile(tmp, g); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode.Perm()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
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
	WriteTextfileLoopMode(ctx, g, path, PublicTextfileMode, every, report)
}

// WriteTextfileLoopMode is WriteTextfileLoop writing the file with mode
// (WriteTextfileMode).
func WriteTextfileLoopMode(ctx context.Context, g prometheus.Gatherer, path string, mode os.FileMode, every time.Duration, report func(error)) {
	if every <= 0 {
		every = DefaultTextfileEvery
	}
	last := ""
	write := func() {
		err := WriteTextfileMode(path, g, mode)
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
