package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration the way every command takes one: Go's
// text (45m, 1h30m, 500ms), a number of days (7d), or a number of seconds
// (90, 2.5). A negative duration is refused. One grammar for all four
// commands, so that what `spool gc --older 7d` takes a daemon's flag takes
// too.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if f, err := strconv.ParseFloat(n, 64); err == nil && f >= 0 {
			return time.Duration(f * float64(24*time.Hour)), nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want text like 45m, 2h, 7d or a number of seconds", s)
	}
	return d, nil
}

// durationValue is a flag.Value with ParseDuration's grammar.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// DurationVar defines a duration flag of fs with ParseDuration's grammar,
// as flag.DurationVar does with Go's alone.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// Duration defines a duration flag of fs with ParseDuration's grammar and
// returns where its value goes.
func Duration(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	DurationVar(fs, p, name, value, usage)
	return p
}
