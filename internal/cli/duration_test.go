package cli

import (
	"flag"
	"io"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"45m", 45 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"500ms", 500 * time.Millisecond, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"90", 90 * time.Second, true},
		{"2.5", 2500 * time.Millisecond, true},
		{"0", 0, true},
		{"-5s", 0, false},
		{"-1d", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v", c.in, got, err)
		}
	}
}

// A daemon's duration flag takes the same grammar as spool gc --older.
func TestDurationFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lease := Duration(fs, "lease", 30*time.Second, "")
	if *lease != 30*time.Second {
		t.Fatalf("default %v", *lease)
	}
	if err := fs.Parse([]string{"--lease", "1d"}); err != nil || *lease != 24*time.Hour {
		t.Fatalf("--lease 1d: %v, %v", *lease, err)
	}
	if err := fs.Parse([]string{"--lease", "-1s"}); err == nil {
		t.Fatal("a negative duration was taken")
	}
}
