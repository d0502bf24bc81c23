package spool

// The directories of the tree as the daemons and commands see them: made
// (EnsureDir) and listed (Names) by name; one a daemon keeps working in
// is held open as a Subdir (subdir.go).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// EnsureDir makes the directory name of the tree (progress, chats,
// chats/<chat>) with the tree's mode if it is missing, and refuses
// anything but a directory in its place.
func (s *Spool) EnsureDir(name string) error { return s.mkdir(name) }

// Names lists up to max names (max <= 0: all) of the directory name of the
// tree (progress/, say); a missing directory has none. Names are returned
// as the directory holds them: a caller checks each (ValidID).
func (s *Spool) Names(name string, max int) ([]string, error) {
	fi, err := s.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w (want a directory)", s.Path(name), ErrNotRegular)
	}
	d, err := openDir(s.root, name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if max <= 0 {
		max = -1
	}
	names, err := d.Readdirnames(max)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}
