package spool

import (
	"fmt"
	"syscall"
)

// RootStamp is what changes when a name is added to, removed from or
// renamed in the spool's root: its mtime and ctime (with the inode, should
// the root be replaced). A poller that compares two stamps reads the root
// whole only when it may have changed; what it does not promise is a new
// stamp for two changes within the filesystem's time granularity (a
// second over sftp), which the caller must allow for.
func (s *Spool) RootStamp() (string, error) {
	fi, err := s.root.Stat(".")
	if err != nil {
		return "", fmt.Errorf("spool %s: %w", s.Dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("spool %s: no stat of the root", s.Dir)
	}
	return fmt.Sprintf("%d.%d %d.%d %d %d", st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Ino, st.Nlink), nil
}
