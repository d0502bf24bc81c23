// Package cli holds what the four commands share: one command skeleton
// (Program, Command: flags, -h, --version and the one turn of an error
// into an exit code), the version line, the duration grammar of flags and
// the two-signal stop. It has no flags of its own.
package cli

import (
	"fmt"
	"runtime/debug"
)

// Exit codes shared by every command (docs/contract.md).
const (
	ExitOK      = 0
	ExitFail    = 1
	ExitUsage   = 2
	ExitTimeout = 124
)

// Version returns "name version (revision)" from the build information, so
// that a binary says which commit it was built from.
func Version(name string) string {
	v, rev, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		if dirty {
			rev += "-dirty"
		}
		return fmt.Sprintf("%s %s (%s)", name, v, rev)
	}
	return fmt.Sprintf("%s %s", name, v)
}
