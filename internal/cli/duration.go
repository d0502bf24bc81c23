package cli

import (
	"flag"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// ParseDuration reads a duration the way every command takes one, in
// the spool's one grammar (spool.ParseDuration): Go's text (45m, 1h30m,
// 500ms), a number of days (7d), or a number of seconds (90, 2.5). A
// negative duration is refused. One grammar for all four commands and
// the spec's timeout, so that what `spool gc --older 7d` takes a
// daemon's flag and a spec take too.
func ParseDuration(s string) (time.Duration, error) { return spool.ParseDuration(s) }

// durationValue is a flag.Value with ParseDuration's grammar.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s" // the zero value, which -h does not show as a default
	}
	return v.d.String()
}

func (v durationValue) Get() any { return *v.d }

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
