package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vmspool/vmspool/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// Submit queues a job: it writes the spec, removes what the chat's previous
// run left (progress/<chat> and chats/<chat>/answer.json), and only then
// creates the marker, whose appearance is the queueing (invariants 2 and 6).
// It returns the job's id. On an error nothing of the job is left behind.
//
// The spec is taken, never renamed over another's (take): of two
// submitters of one id, exactly one queues the job, and the other gets
// "already exists", whatever the check before said.
func (s *Spool) Submit(sp *Spec) (string, error) {
	if err := sp.Validate(); err != nil {
		return "", err
	}
	if err := s.Floor.Check(s.RootPath); err != nil {
		return "", err
	}
	now := time.Now()
	if sp.ID == "" {
		sp.ID = NewJobID(now)
	}
	if sp.Created == 0 {
		sp.Created = Stamp(now)
	}
	id := sp.ID
	dfd := s.dirfd()
	if n := takenBy(id, func(n string) bool { return atomicfile.ExistsAt(dfd, n) }); n != "" {
		return "", fmt.Errorf("job %s: already exists (%s)", id, s.Path(n))
	}
	b, err := marshalSpec(sp)
	if err != nil {
		return "", err
	}
	own := dirOwner(dfd)
	// Two fsyncs make the submit durable: the spec's data, then the
	// directory once both names are in it. The spec's arrival comes before
	// the marker's, and one directory's entries become durable in the
	// order they were made (a journal commits them in order; the
	// power-loss sweep, docs/reliability.md, checks it), so a marker is
	// never durable without its spec. The marker is empty: it has no
	// data to sync.
	if err := s.takeSpec(id, b, treeOpts(own, atomicfile.InDir(dfd))); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("job %s: already exists (%s)", id, s.Path(id+ExtSpec))
		}
		return "", fmt.Errorf("job %s: writing spec: %w", id, err)
	}
	if err := s.ClearChat(sp.Chat); err != nil {
		unix.Unlinkat(dfd, id+ExtSpec, 0)
		return "", fmt.Errorf("job %s: %w", id, err)
	}
	// Renamed in from an empty temporary like every document (invariant
	// 1), not synced: the directory's sync below makes it durable.
	if err := writeAt(id+ExtReady, nil, nil, treeOpts(own, atomicfile.InDir(dfd), atomicfile.NoSync())); err != nil {
		unix.Unlinkat(dfd, id+ExtSpec, 0)
		return "", fmt.Errorf("job %s: writing marker: %w", id, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		// Not durable: taken back, unless a daemon claimed it already.
		if rerr := unix.Unlinkat(dfd, id+ExtReady, 0); rerr == nil {
			unix.Unlinkat(dfd, id+ExtSpec, 0)
			return "", fmt.Errorf("job %s: making the submit durable: %w", id, err)
		}
		return "", fmt.Errorf("job %s: claimed at once, but the submit could not be made durable: %w", id, err)
	}
	// After the marker, as a hint to daemons that poll (doorbell.go).
	s.Ring(id)
	return id, nil
}

// marshalSpec is the spec's document, refused if no reader would read it
// (MaxDocument).
func marshalSpec(sp *Spec) ([]byte, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("job %s: spec: %w", sp.ID, err)
	}
	if len(b)+1 > MaxDocument {
		return nil, fmt.Errorf("job %s: spec: %w (%d bytes, limit %d)", sp.ID, ErrTooLarge, len(b)+1, MaxDocument)
	}
	return append(b, '\n'), nil
}

// ClearChat removes the chat's progress document and answer, so that
// nothing of a previous run can be read as the next one's. A symlink in
// either place is removed, never followed. A symlink, or anything but a
// directory, at progress/, chats/ or chats/<chat> is refused, even one
// that stays in the tree: through it the submit would remove another
// chat's documents.
func (s *Spool) ClearChat(chat string) error {
	if err := CheckChatID(chat); err != nil {
		return err
	}
	for _, dir := range []string{ProgressDir, ChatsDir, ChatsDir + "/" + chat} {
		if err := s.plainDir(dir); err != nil {
			return fmt.Errorf("chat %q: %w", chat, err)
		}
	}
	if err := removeName(s.root, ProgressDir+"/"+chat); err != nil {
		return chatError(chat, "removing progress", s.plain(ProgressDir+"/"+chat, false, err))
	}
	answer := ChatsDir + "/" + chat + "/" + AnswerFile
	if err := removeName(s.root, answer); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return chatError(chat, "removing answer", s.plain(answer, false, err))
	}
	return nil
}

// plainDir refuses what stands at the directory name of the tree if it
// is not a directory (a symlink, even one that stays in the tree, or a
// file); a name that is missing is fine.
func (s *Spool) plainDir(name string) error {
	fi, err := s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return s.plain(name, false, err)
	case fi.IsDir():
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return s.plain(name, true, ErrNotRegular)
	}
	return fmt.Errorf("%s is a file, not a directory; remove it (ls -l %s)", name, s.Path(name))
}
