package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// escapeError is an operation refused because a directory on the way to
// its name is a symlink. os.Root says only "path escapes from parent", or
// that the name is not a directory, which tells the operator neither
// which name to look at nor what to do; this says both. It wraps the
// error of the operation, so that errors.Is classifies it as before.
type escapeError struct {
	link string // the symlink, as a name of the tree
	path string // its host path
	out  bool   // it leads out of the tree
	err  error
}

func (e *escapeError) Error() string {
	if e.out {
		return fmt.Sprintf("%s is a symlink out of the spool, not a directory; remove it (ls -l %s)", e.link, e.path)
	}
	return fmt.Sprintf("%s is a symlink, not a directory; remove it (ls -l %s)", e.link, e.path)
}

func (e *escapeError) Unwrap() error { return e.err }

// plain returns err, or an escapeError if a directory on the way to name
// (a slash-separated name of the tree), or name itself when self, is a
// symlink. It reads only after a failure: the operations that work pay
// nothing.
func (s *Spool) plain(name string, self bool, err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parts := strings.Split(name, "/")
	if !self {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, lerr := s.root.Lstat(p)
		if lerr != nil {
			// Lstat goes through the same directories: one on the way
			// is a symlink (found at an earlier p), or p is missing.
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		e := &escapeError{link: p, path: s.Path(p), out: true, err: err}
		if target, rerr := s.root.Readlink(p); rerr == nil && !path.IsAbs(target) {
			// A relative link that stays in the tree is followed by
			// os.Root; it is "out" only if it climbs above the root.
			to := path.Clean(path.Join(path.Dir(p), target))
			e.out = to == ".." || strings.HasPrefix(to, "../")
		}
		return e
	}
	return err
}

// chatError says what failed for chat: a symlink in the way is the
// whole story (`chat "c": chats/c is a symlink out of the spool; ...`),
// anything else keeps what was being done (or is err itself, with no
// doing).
func chatError(chat, doing string, err error) error {
	var esc *escapeError
	if errors.As(err, &esc) {
		return fmt.Errorf("chat %q: %w", chat, err)
	}
	if doing == "" {
		return err
	}
	return fmt.Errorf("chat %s: %s: %w", chat, doing, err)
}
