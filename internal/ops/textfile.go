package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/vmspool/vmspool/internal/atomicfile"
	"golang.org/x/sys/unix"
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
// collector: into a temporary of path's directory (a dot name, which the
// collector ignores since it reads only *.prom), given mode, then renamed
// over path, so that node_exporter never reads half a file, nor one with
// another mode. path must end in .prom; its directory is made if missing,
// with mode plus the search bit of each reader (0640 gives 0750). Modes are
// set whatever the umask.
//
// The directory may be writable by others (the spool's group, say), so
// nothing here goes by name once the directory is open: it is opened
// without following a symlink (one there is refused: it would take the
// write elsewhere), the temporary is created with O_EXCL|O_NOFOLLOW through
// that handle under a random name, its mode set through its descriptor, and
// the rename made through the handle. A link planted anywhere in the
// directory can neither be written through nor have its target's mode
// changed.
func WriteTextfileMode(path string, g prometheus.Gatherer, mode os.FileMode) error {
	data, err := Render(g)
	if err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	return writeTextfile(path, data, mode)
}

func writeTextfile(path string, data []byte, mode os.FileMode) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("metrics textfile %s: name must end in .prom (node_exporter reads only those)", path)
	}
	fail := func(err error) error { return fmt.Errorf("metrics textfile %s: %w", path, err) }
	dir, base := filepath.Dir(path), filepath.Base(path)
	dirMode := mode.Perm() | (mode.Perm()&0o444)>>2
	created := false
	switch fi, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return fail(err)
		}
		created = true
	case err != nil:
		return fail(err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fail(fmt.Errorf("directory %s is a symlink: refusing to write through it", dir))
	case !fi.IsDir():
		return fail(fmt.Errorf("%s is not a directory", dir))
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open %s: %w (a symlink is refused)", dir, err))
	}
	defer unix.Close(dfd)
	if created {
		// MkdirAll obeys the umask; a directory made here does not. One
		// that was there is the operator's, and keeps its mode.
		if err := unix.Fchmod(dfd, uint32(dirMode)); err != nil {
			return fail(err)
		}
	}
	// The one atomic write (internal/atomicfile) on the directory's
	// descriptor: a new O_EXCL|O_NOFOLLOW temporary, its mode set
	// through it, renamed through the handle; not fsync'd (the next
	// write is 15 s away).
	if err := atomicfile.WriteFile(base, data, atomicfile.InDir(dfd), atomicfile.WithMode(mode), atomicfile.NoSync()); err != nil {
		return fail(err)
	}
	return nil
}

// Render is g's metrics in the text format node_exporter reads.
func Render(g prometheus.Gatherer) ([]byte, error) {
	var buf bytes.Buffer
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// TextfileWriter writes one rendering of the metrics where it belongs.
type TextfileWriter func(data []byte) error

// PathWriter writes to path with mode through WriteTextfileMode's
// protections: a textfile outside the spool.
func PathWriter(path string, mode os.FileMode) TextfileWriter {
	return func(data []byte) error { return writeTextfile(path, data, mode) }
}

// WriteTextfileLoop writes the textfile now, then every `every`, until ctx
// is done, and once more then, so that the file holds the last counts of a
// daemon that stopped. Errors do not stop the loop (a full disk must not
// take the daemon down); each new one is passed to report (which may be
// nil) once, not at every tick, so that the log says what happened rather
// than repeating it.
func WriteTextfileLoop(ctx context.Context, g prometheus.Gatherer, path string, every time.Duration, report func(error)) {
	TextfileLoop(ctx, g, PathWriter(path, PublicTextfileMode), every, report)
}

// TextfileLoop is WriteTextfileLoop writing through write.
func TextfileLoop(ctx context.Context, g prometheus.Gatherer, write TextfileWriter, every time.Duration, report func(error)) {
	if every <= 0 {
		every = DefaultTextfileEvery
	}
	last := ""
	once := func() {
		data, err := Render(g)
		if err == nil {
			err = write(data)
		}
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
	once()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			once()
			return
		case <-t.C:
			once()
		}
	}
}
