package vmgate

import (
	"strings"
	"testing"
)

func TestValidToolName(t *testing.T) {
	for name, want := range map[string]bool{
		"git_commit": true, "host_commit": true, "commit.v2": true, "_x": true, "a-b": true,
		"": false, "1commit": false, "-x": false, "a b": false, "x`y`": false, "a\nb": false, "é": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if got := ValidToolName(name); got != want {
			t.Errorf("ValidToolName(%q) = %v; want %v", name, got, want)
		}
	}
}
