package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ProgressHeadMax bounds what ProgressHead reads of a document: its
// scalar fields come first (job, chat, seq, updated, started, done, state,
// status: a status is at most MaxStatus bytes, which JSON may write six
// bytes a byte), and the events and the question after them.
const ProgressHeadMax = 64 << 10

// ProgressStamp is the stamp of progress/<chat> (an lstat: a symlink's is
// its own), for a caller that keeps what it read of each version.
func (s *Spool) ProgressStamp(chat string) (FileStamp, error) {
	if err := CheckChatID(chat); err != nil {
		return FileStamp{}, err
	}
	fi, err := s.root.Lstat(ProgressPath(chat))
	if err != nil {
		return FileStamp{}, fmt.Errorf("chat %s: progress: %w", chat, err)
	}
	if !fi.Mode().IsRegular() {
		return FileStamp{}, fmt.Errorf("chat %s: progress: %w (%s)", chat, ErrNotRegular, kind(fi))
	}
	return FileStampOf(fi), nil
}

// ProgressHead reads the head of progress/<chat>: the document's scalar
// fields that come before its events (Job, Chat, Seq, Updated, Started,
// Done, State, Status), and the stamp of the version read. It reads at
// most ProgressHeadMax bytes, whatever the document holds, so a listing
// of every chat costs the same for documents of 1 KB or 16 MB. Events,
// Question, Exit, Error, Written and the fields after them are left
// empty. A field that the head cuts, or one that comes after the events
// (a document spoold did not write), is left empty too; a head that is
// not the start of a JSON object wraps ErrCorrupt.
func (s *Spool) ProgressHead(chat string) (*Progress, FileStamp, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, FileStamp{}, err
	}
	f, fi, err := openRegular(s.root, ProgressPath(chat), os.O_RDONLY)
	if err != nil {
		return nil, FileStamp{}, fmt.Errorf("chat %s: progress: %w", chat, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, ProgressHeadMax))
	if err != nil {
		return nil, FileStamp{}, fmt.Errorf("chat %s: progress: %w", chat, err)
	}
	p, err := parseProgressHead(b)
	if err != nil {
		return nil, FileStamp{}, fmt.Errorf("chat %s: %w", chat, err)
	}
	return p, FileStampOf(fi), nil
}

// parseProgressHead decodes the scalar fields of a document's first
// bytes, up to its events or the end of what it was given.
func parseProgressHead(b []byte) (*Progress, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("progress: %w: not a JSON object", ErrCorrupt)
	}
	var p Progress
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var dst any
		switch key {
		case "job":
			dst = &p.Job
		case "chat":
			dst = &p.Chat
		case "seq":
			dst = &p.Seq
		case "updated":
			dst = &p.Updated
		case "started":
			dst = &p.Started
		case "done":
			dst = &p.Done
		case "state":
			dst = &p.State
		case "status":
			dst = &p.Status
		case "events", "question":
			// The rest is what a head does not hold.
			return p.headClipped(), nil
		default:
			dst = new(json.RawMessage)
		}
		if err := dec.Decode(dst); err != nil {
			break // cut by the bound, or not a field of ours: what came is kept
		}
	}
	return p.headClipped(), nil
}

// headClipped clips the head's strings as a written document's are, and
// drops a chat that is not an id.
func (p *Progress) headClipped() *Progress {
	if p.Chat != "" && !ValidID(p.Chat) {
		p.Chat = ""
	}
	p.clip()
	return p
}
