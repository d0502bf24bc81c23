package spool

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
)

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
