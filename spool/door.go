package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The few operations the daemons and commands need beyond the documents'
// own readers and writers. Every one goes through the tree's os.Root, like
// everything else in this package: nothing outside it opens, renames or
// syncs a file of the tree.

// MarkerLease returns the lease a queued job's marker carries: the
// attempt before, put back by a recovery, whose processes must be gone
// before the next attempt starts. nil when the marker carries none.
func (s *Spool) MarkerLease(job string) *Lease {
	if !ValidID(job) {
		return nil
	}
	m := s.readMarkerContent(job + ExtReady)
	if !m.recovered() {
		return nil
	}
	l := m.Lease
	return &l
}

// LooseChat reads the "chat" of a spec that may not validate (it names
// nothing to run, say), for a message or a progress document about it:
// "" when there is no such spec or no valid chat in it.
func (s *Spool) LooseChat(job string) string {
	if !ValidID(job) {
		return ""
	}
	f, _, err := openRegular(s.root, job+ExtSpec, os.O_RDONLY)
	if err != nil {
		return ""
	}
	defer f.Close()
	var v struct {
		Chat string `json:"chat"`
	}
	if json.NewDecoder(io.LimitReader(f, MaxDocument)).Decode(&v) != nil || !ValidID(v.Chat) {
		return ""
	}
	return v.Chat
}

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
	d, err := s.root.Open(name)
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
