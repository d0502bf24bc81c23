package spool

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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

// Duration is a time.Duration written as Go's duration text ("45m") and
// read from that text or from a number of seconds (what a Python writer
// would naturally put).
type Duration time.Duration

// MarshalJSON writes "45m0s"-style text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "45m", "90s", 2700 or 2700.5.
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
		v, err := time.ParseDuration(s)
		if err != nil {
			if f, ferr := strconv.ParseFloat(s, 64); ferr == nil {
				v = time.Duration(f * float64(time.Second))
			} else {
				return fmt.Errorf("duration %q: want text like \"45m\" or a number of seconds", s)
			}
		}
		if v < 0 {
			return fmt.Errorf("duration %q is negative", s)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration %s: want text like \"45m\" or a number of seconds", b)
	}
	if f < 0 || math.IsNaN(f) || f > 1e9 {
		return fmt.Errorf("duration %v is out of range", f)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}
