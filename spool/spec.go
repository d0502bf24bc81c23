package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/vmspool/vmspool/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// MaxAttempts bounds a spec's attempts, so that a typo cannot make a job
// that is retried forever.
const MaxAttempts = 100

// Spec is a job's spec, <job>.json: what to run, where, for which chat.
// It is written once, before the job's marker, and never rewritten.
type Spec struct {
	ID      string            `json:"id"`
	Chat    string            `json:"chat"`
	Created float64           `json:"created"`
	Argv    []string          `json:"argv,omitempty"`
	Script  *string           `json:"script,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout Duration          `json:"timeout,omitempty"`
	// Attempts is how many times the job may be started in all, counting
	// the first; 0 in a document means 1.
	Attempts int `json:"attempts,omitempty"`
	// Limits asks for other limits on what the job writes than the
	// daemon's defaults, within its ceilings; nil: the defaults.
	Limits *Limits `json:"limits,omitempty"`
}

// Validate checks what a daemon needs to run the spec, with a one-line
// error that says what is wrong.
func (s *Spec) Validate() error {
	if s.ID != "" {
		if err := CheckJobID(s.ID); err != nil {
			return err
		}
	}
	if s.Chat == "" {
		return errors.New(`spec has no "chat"`)
	}
	if err := CheckChatID(s.Chat); err != nil {
		return err
	}
	switch {
	case s.Argv != nil && s.Script != nil:
		return errors.New(`spec has both "argv" and "script"; give exactly one`)
	case s.Argv == nil && s.Script == nil:
		return errors.New(`spec has neither "argv" nor "script"; give exactly one`)
	case s.Script == nil && len(s.Argv) == 0:
		return errors.New(`spec's "argv" is empty: nothing to run`)
	case s.Script == nil && s.Argv[0] == "":
		return errors.New(`spec's "argv[0]" is empty: nothing to run`)
	case s.Script != nil && len(bytes.TrimSpace([]byte(*s.Script))) == 0:
		return errors.New(`spec's "script" is empty: nothing to run`)
	}
	for _, a := range s.Argv {
		if bytes.IndexByte([]byte(a), 0) >= 0 {
			return errors.New(`spec's "argv" holds a NUL byte`)
		}
	}
	// A NUL cannot reach exec(2): refused here, not when the job starts.
	if strings.IndexByte(s.Cwd, 0) >= 0 {
		return errors.New(`spec's "cwd" holds a NUL byte`)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf(`spec's "env" has an invalid name %q`, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf(`spec's "env" value of %s holds a NUL byte`, k)
		}
	}
	if err := s.Limits.validate(); err != nil {
		return err
	}
	if s.Attempts < 0 || s.Attempts > MaxAttempts {
		return fmt.Errorf(`spec's "attempts" is %d; want 1 to %d`, s.Attempts, MaxAttempts)
	}
	return nil
}

// MaxTries returns Attempts with its default of 1.
func (s *Spec) MaxTries() int {
	if s.Attempts <= 0 {
		return 1
	}
	return s.Attempts
}

// ParseSpec parses and validates a spec document. Unknown fields are
// ignored, as docs/contract.md asks of every reader.
func ParseSpec(b []byte) (*Spec, error) {
	var s Spec
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: want a JSON object", ErrCorrupt)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &s, nil
}

// ReadSpec reads <job>.json. A spec without "id" or "created" takes them
// from its file name and mtime, the way a hand submission leaves them; a
// spec whose "id" is not its file name is corrupt.
func (s *Spool) ReadSpec(job string) (*Spec, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	name := job + ExtSpec
	b, fi, err := readFile(s.root, name, MaxDocument)
	if err != nil {
		return nil, fmt.Errorf("job %s: spec %s: %w", job, s.Path(name), err)
	}
	if err := s.CheckOwner(name, fi); err != nil {
		return nil, fmt.Errorf("job %s: spec %w", job, err)
	}
	sp, err := ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("job %s: spec %s: %w", job, s.Path(name), err)
	}
	if sp.ID == "" {
		sp.ID = job
	} else if sp.ID != job {
		return nil, fmt.Errorf("job %s: spec %s: %w: its \"id\" is %q", job, s.Path(name), ErrCorrupt, sp.ID)
	}
	if sp.Created == 0 {
		sp.Created = Stamp(fi.ModTime())
	}
	return sp, nil
}

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
