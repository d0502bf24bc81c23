package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
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
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// The contract's words, not Go's: "argv" is a string; want a
			// list of strings.
			if ft := specField(te.Field); ft != nil && (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && ft.Elem() == te.Type {
				return nil, fmt.Errorf("%w: %q holds %s; want %s", ErrCorrupt, te.Field, jsonKind(te.Value), wantOf(ft))
			}
			return nil, fmt.Errorf("%w: %q is %s; want %s", ErrCorrupt, te.Field, jsonKind(te.Value), wantOf(te.Type))
		}
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

// jsonKind names a JSON value's kind as json.UnmarshalTypeError gives it.
func jsonKind(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "object":
		return "an object"
	case v == "array":
		return "a list"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return v
}

// wantOf says what a Go type of the spec takes, in JSON's words.
func wantOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(wantOf(t.Elem()), "a "), "an ") + "s"
	case reflect.Map:
		return "an object of " + strings.TrimPrefix(wantOf(t.Elem()), "a ") + "s"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64:
		return "a whole number"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Pointer:
		return wantOf(t.Elem())
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// specField is the type of the Spec field of JSON name name, or nil.
func specField(name string) reflect.Type {
	t := reflect.TypeFor[Spec]()
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f.Type
		}
	}
	return nil
}
