package spool

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Stamp converts t to seconds since the epoch, the way Python's time.time()
// gives them, which is how every time in the tree is written.
func Stamp(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Now is Stamp(time.Now()).
func Now() float64 { return Stamp(time.Now()) }

// Round2 rounds a stamp to 10 ms like Python's round(time.time(), 2), the
// precision of a progress document's "updated".
func Round2(s float64) float64 { return math.Round(s*100) / 100 }

// TimeOf converts a stamp back to a time.Time.
func TimeOf(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Duration is a time.Duration written as Go's duration text ("45m0s")
// and read in ParseDuration's grammar ("45m", "7d", "90") or from a
// number of seconds (what a Python writer would naturally put).
type Duration time.Duration

// MarshalJSON writes "45m0s"-style text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "45m", "7d", "90", 2700 or 2700.5; "", 0 and
// null are no duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s == "" {
			*d = 0
			return nil
		}
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration %s: want text like 45m, 2h, 7d or a number of seconds", b)
	}
	if f < 0 || math.IsNaN(f) || f*float64(time.Second) >= math.MaxInt64 {
		return fmt.Errorf("duration %v is out of range", f)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// ParseDuration reads a duration in the one grammar of the spec's
// timeout and of every command's flags: Go's text (45m, 1h30m, 500ms), a
// number of days (7d, 1.5d), or a number of seconds (90, 2.5). A number
// is decimal digits with an optional fraction (no sign, exponent or
// "inf"). A negative duration is refused, and one longer than a
// time.Duration holds (about 292 years). The Python client
// (clients/python/vmspool.py, _parse_duration) reads the same grammar;
// tests/testdata/contract/submit.json holds both to it.
func ParseDuration(s string) (time.Duration, error) {
	num, unit := s, float64(time.Second)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		num, unit = n, float64(24*time.Hour)
	}
	if decimal(num) {
		f, err := strconv.ParseFloat(num, 64)
		if err == nil && f*unit < math.MaxInt64 {
			return time.Duration(f * unit), nil
		}
		return 0, fmt.Errorf("duration %q is out of range", s)
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("duration %q: want text like 45m, 2h, 7d or a number of seconds", s)
	case d < 0:
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// decimal says whether s is digits with an optional fraction: 90, 2.5, .5.
func decimal(s string) bool {
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}
