package spool

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// ClaimMark is the suffix of chats/<chat>/<job>.claim, the mark a daemon
// on a shared filesystem leaves before it claims a job of the chat, so
// that another host finds the chat's running jobs in the chat's directory
// rather than by listing the whole root (ChatRunning).
const ClaimMark = ".claim"

// MarkClaim leaves chats/<chat>/<job>.claim before a claim of job (the
// chat's directory must exist: LockChat makes it). The mark is empty and
// not synced: it says where to look, and the job's lease says the rest.
func (s *Spool) MarkClaim(chat, job string) error {
	if err := CheckChatID(chat); err != nil {
		return err
	}
	if err := CheckJobID(job); err != nil {
		return err
	}
	name := ChatDir(chat) + "/" + job + ClaimMark
	f, _, err := openRegular(s.root, name, os.O_WRONLY|os.O_CREATE)
	if errors.Is(err, ErrNotRegular) {
		// What stands at the mark's name (a FIFO, a symlink) is nobody's
		// document: it goes, and the mark takes its place. A directory
		// is refused by the removal.
		if err = removeName(s.root, name); err == nil {
			f, _, err = openRegular(s.root, name, os.O_WRONLY|os.O_CREATE)
		}
	}
	if err != nil {
		return chatError(chat, "claim mark", s.plain(name, false, err))
	}
	return f.Close()
}

// ChatRunning lists the leases of the chat's running jobs but except's,
// each with the stamp of its file (a heartbeat moves it), as the claim
// marks of the chat's directory (MarkClaim) name them. A job claimed a
// moment ago whose lease is not written yet (its .running still holds the
// marker) is listed with a Lease that has only Job and Chat (Worker ""),
// and a zero stamp: it counts as running. Other leases that do not read
// are left out: the recovery deals with them. A mark whose job is neither
// queued nor running is removed.
func (s *Spool) ChatRunning(chat, except string) ([]*Lease, []FileStamp, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, nil, err
	}
	names, err := s.Names(ChatDir(chat), 0)
	if err != nil {
		return nil, nil, err
	}
	var ls []*Lease
	var beats []FileStamp
	for _, n := range names {
		job, ok := strings.CutSuffix(n, ClaimMark)
		if !ok || job == except || !ValidID(job) {
			continue
		}
		l, fi, err := s.ReadLease(job)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, rerr := s.root.Lstat(job + ExtReady); errors.Is(rerr, fs.ErrNotExist) {
				removeName(s.root, ChatDir(chat)+"/"+n)
			}
			continue
		case errors.Is(err, ErrCorrupt):
			if m := s.readMarkerContent(job + ExtRunning); m.Worker == "" {
				ls = append(ls, &Lease{Job: job, Chat: chat})
				beats = append(beats, FileStamp{})
			}
			continue
		case err != nil || l.Chat != chat:
			continue
		}
		ls = append(ls, l)
		beats = append(beats, FileStampOf(fi))
	}
	return ls, beats, nil
}
