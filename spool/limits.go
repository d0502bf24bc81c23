package spool

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Limits bounds what one job may write into the tree, so that a runaway
// job (a loop printing without end, or appending events in a tight loop)
// cannot fill the disk every chat shares. Zero fields take the daemon's
// defaults; a spec may ask for other values within the daemon's ceilings
// (docs/operations.md, "Limits").
type Limits struct {
	// Log is the most <job>.log may hold: past it, the log keeps its first
	// half and what comes after a cut, with a line that marks the cut.
	Log int64 `json:"log,omitempty"`
	// Events is the most <job>.events may hold: past it, the job is ended
	// failed with the reason, as at a timeout.
	Events int64 `json:"events,omitempty"`
	// EventRate is how many events a second are relayed to the chat's
	// progress; past it they are dropped from the progress (never from
	// the file) and one note says how many.
	EventRate int `json:"event_rate,omitempty"`
}

func (l *Limits) validate() error {
	if l == nil {
		return nil
	}
	if l.Log < 0 || l.Events < 0 || l.EventRate < 0 {
		return errors.New(`spec's "limits" must not be negative`)
	}
	return nil
}

// ErrBelowFloor is wrapped when the spool's filesystem has less free space
// (or fewer free inodes) than the floor: new jobs are refused, running ones
// go on.
var ErrBelowFloor = errors.New("below the free-space floor")

// Floor is the free space below which no new job is taken: spoold stops
// claiming and `spool submit` refuses, as Postfix's queue_minfree refuses
// mail. A zero field checks nothing.
type Floor struct {
	Bytes   int64   // free bytes (for an unprivileged user)
	Percent float64 // free space as a percentage of the filesystem's size
	Inodes  int64   // free inodes
}

// DefaultFloor is the floor when nothing else is said: 64 MiB, 1 % and
// 1,000 inodes, whichever is reached first.
var DefaultFloor = Floor{Bytes: 64 << 20, Percent: 1, Inodes: 1000}

// Space is what statfs says of a spool's filesystem.
type Space struct {
	Free, Size         int64 // bytes free for an unprivileged user, and in all
	FreeInodes, Inodes int64
}

// SpaceOf reads the free space of the filesystem holding dir.
func SpaceOf(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, fmt.Errorf("spool %s: statfs: %w", dir, err)
	}
	return spaceOf(&st), nil
}

// spaceOf reads a statfs. A filesystem that says it has no limit on
// inodes (CephFS reports its free inodes as the largest number, -1 when
// read as signed) is not judged by them, as one that reports none.
func spaceOf(st *syscall.Statfs_t) Space {
	bs := int64(st.Bsize)
	sp := Space{Free: int64(st.Bavail) * bs, Size: int64(st.Blocks) * bs}
	if st.Ffree <= math.MaxInt64 && st.Files <= math.MaxInt64 {
		sp.FreeInodes, sp.Inodes = int64(st.Ffree), int64(st.Files)
	}
	return sp
}

// Below returns an error wrapping ErrBelowFloor that says which part of f
// sp is below, or nil. A filesystem that reports no inodes (some network
// filesystems) is not judged by them.
func (f Floor) Below(dir string, sp Space) error {
	const hint = "free some space, or lower the floor (docs/operations.md, \"Limits\")"
	switch {
	case f.Bytes > 0 && sp.Free < f.Bytes:
		return fmt.Errorf("spool %s: %w: %s free, the floor is %s; %s", dir, ErrBelowFloor, FormatSize(sp.Free), FormatSize(f.Bytes), hint)
	case f.Percent > 0 && sp.Size > 0 && float64(sp.Free)*100 < f.Percent*float64(sp.Size):
		return fmt.Errorf("spool %s: %w: %.2f%% free, the floor is %g%%; %s", dir, ErrBelowFloor, float64(sp.Free)*100/float64(sp.Size), f.Percent, hint)
	case f.Inodes > 0 && sp.Inodes > 0 && sp.FreeInodes < f.Inodes:
		return fmt.Errorf("spool %s: %w: %d inodes free, the floor is %d; %s", dir, ErrBelowFloor, sp.FreeInodes, f.Inodes, hint)
	}
	return nil
}

// Check reads dir's free space and judges it against f.
func (f Floor) Check(dir string) error {
	if f == (Floor{}) {
		return nil
	}
	sp, err := SpaceOf(dir)
	if err != nil {
		return err
	}
	return f.Below(dir, sp)
}

// FloorFromEnv is DefaultFloor with what $SPOOL_MIN_FREE,
// $SPOOL_MIN_FREE_PERCENT and $SPOOL_MIN_FREE_INODES say instead (for
// `spool submit` from cron, which takes no flags for it): "0" turns a part
// off.
func FloorFromEnv(getenv func(string) string) (Floor, error) {
	f := DefaultFloor
	if v := getenv("SPOOL_MIN_FREE"); v != "" {
		n, err := ParseSize(v)
		if err != nil {
			return f, fmt.Errorf("$SPOOL_MIN_FREE: %w", err)
		}
		f.Bytes = n
	}
	if v := getenv("SPOOL_MIN_FREE_PERCENT"); v != "" {
		p, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil || p < 0 || p > 100 {
			return f, fmt.Errorf("$SPOOL_MIN_FREE_PERCENT %q: want 0 to 100", v)
		}
		f.Percent = p
	}
	if v := getenv("SPOOL_MIN_FREE_INODES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("$SPOOL_MIN_FREE_INODES %q: want a count", v)
		}
		f.Inodes = n
	}
	return f, nil
}

// ParseSize reads a size: a number of bytes, or one with a unit (k, M, G,
// T, or KiB, MiB, GiB, TiB, all powers of 1024; "kB", "MB"... too).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want bytes, or a number with k, M, G or T (powers of 1024)", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (k, M, G or T)", s, t[i:])
	}
	v := f * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// FormatSizeFlag writes n bytes as ParseSize reads them back (64MiB), for
// a flag's default.
func FormatSizeFlag(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// FormatSize writes n bytes as a person reads them (12 MiB).
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// CutLog keeps <job>.log within a limit while the job still appends to it:
// the file is cut back to its first head bytes, then a line marking the
// cut and the last tail bytes it held are appended; the job's own appends
// (O_APPEND) go on after them. So the log keeps its head and its newest
// part. It returns how many bytes were dropped (what the job wrote between
// the read of the tail and the cut is among them). The file is reached as
// every name of the tree is: never through a link, never anything but a
// plain file.
func (s *Spool) CutLog(job string, head, tail int64, mark string) (int64, error) {
	if err := CheckJobID(job); err != nil {
		return 0, err
	}
	f, fi, err := openRegular(s.root, job+ExtLog, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return 0, fmt.Errorf("job %s: log: %w", job, err)
	}
	defer f.Close()
	size := fi.Size()
	if size <= head+tail {
		return 0, nil
	}
	last := make([]byte, tail)
	n, err := f.ReadAt(last, size-tail)
	if err != nil && n < len(last) {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	now, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	if err := f.Truncate(head); err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	if _, err := f.Write(append([]byte(mark), last[:n]...)); err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	return now.Size() - head - int64(n), nil
}
