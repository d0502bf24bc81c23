package spool

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/oklog/ulid/v2"
)

// ErrInvalidID is wrapped by every error about a malformed job or chat id.
var ErrInvalidID = errors.New("invalid id (letters, digits, . _ -; must not start with . _ -; max 128)")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether s may name a job or a chat: it can then never
// climb out of its directory, hide as a temporary or carry a NUL.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// CheckJobID returns a one-line error naming the bad id, or nil.
func CheckJobID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("job %q: %w", id, ErrInvalidID)
	}
	return nil
}

// CheckChatID returns a one-line error naming the bad id, or nil.
func CheckChatID(chat string) error {
	if !ValidID(chat) {
		return fmt.Errorf("chat %q: %w", chat, ErrInvalidID)
	}
	return nil
}

// NewJobID returns a ULID: 26 characters that sort by submit time, so that
// `ls` lists jobs in the order they came.
func NewJobID(t time.Time) string {
	return ulid.MustNew(ulid.Timestamp(t), rand.Reader).String()
}
