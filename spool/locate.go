package spool

import (
	"os"
	"path/filepath"
)

// DefaultRoot is the spool's root for root (the user): /var/spool/vm.
const DefaultRoot = "/var/spool/vm"

// Locate says where the spool is (the path of its root, to give Open or
// Create), the way docs/contract.md says: the --spool flag wins, then
// $SPOOL_DIR, then $JOBS_DIR (the Python tools' name), then /var/spool/vm
// for root and $XDG_STATE_HOME/vmspool (or
// ~/.local/state/vmspool) for anyone else.
//
// getenv is passed in so that the library never reads the environment behind
// its caller's back; cmd/ passes os.Getenv.
func Locate(flag string, getenv func(string) string, uid int) string {
	if flag != "" {
		return flag
	}
	if d := getenv("SPOOL_DIR"); d != "" {
		return d
	}
	if d := getenv("JOBS_DIR"); d != "" {
		return d
	}
	if uid == 0 {
		return DefaultRoot
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "vmspool")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "state", "vmspool")
}
