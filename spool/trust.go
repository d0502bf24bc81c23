package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// ErrUntrusted is wrapped when a spec or a marker is owned by a user the
// reader was told not to trust (TrustOwners): on a spool another user can
// write, a daemon running as root must not run what that user wrote.
var ErrUntrusted = errors.New("owned by an untrusted user")

// TrustOwners makes ReadSpec and CheckOwner refuse a file owned by anyone
// but these uids (spoold passes its own and root's). Without a call, every
// owner is trusted, as the tree's modes already keep other users out. It
// must be called before the Spool is shared.
func (s *Spool) TrustOwners(uids ...int) {
	s.owners = s.owners[:0]
	for _, u := range uids {
		if !slices.Contains(s.owners, uint32(u)) {
			s.owners = append(s.owners, uint32(u))
		}
	}
}

// CheckOwner returns an error wrapping ErrUntrusted when fi, a file of the
// tree, is owned by a uid TrustOwners did not name.
func (s *Spool) CheckOwner(name string, fi fs.FileInfo) error {
	if len(s.owners) == 0 || fi == nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || slices.Contains(s.owners, st.Uid) {
		return nil
	}
	return fmt.Errorf("%s: %w (uid %d; only uid %v may queue jobs here)", s.Path(name), ErrUntrusted, st.Uid, s.owners)
}

// CheckRootSafe returns an error when a process running as root must not
// serve the spool at dir: one that is not owned by root, or that group or
// others may write, lets another user put a spec there that root would
// run. For any other user it returns nil: such a daemon runs jobs as
// itself, with nothing to give away.
func CheckRootSafe(dir string, euid int) error {
	if euid != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	switch {
	case st.Uid != 0:
		return fmt.Errorf("spool %s: owned by uid %d, and this daemon runs as root: it would run as root whatever that user queues (run it as the spool's owner, as the packaged unit does, or chown the spool to root)", dir, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("spool %s: mode %04o lets group or others write, and this daemon runs as root: it would run as root whatever they queue (chmod go-w it)", dir, fi.Mode().Perm())
	}
	return nil
}
