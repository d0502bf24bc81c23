package spool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symlink where the spool wants a directory is named in the error, with
// what to do; the error still wraps what the operation said.
func TestSymlinkInTheWay(t *testing.T) {
	for _, tc := range []struct {
		name, link, target string
		op                 func(s *Spool) error
		want               string
		keep               string // a file of the tree the op must not remove
	}{
		{"answer, chat dir out", "chats/c", "OUT", func(s *Spool) error { return s.WriteAnswer("c", &Answer{Job: "j", Question: "q", Answer: "a"}) },
			`chat "c": chats/c is a symlink out of the spool, not a directory; remove it (ls -l `, ""},
		{"answer, chat dir in", "chats/c", "../gate", func(s *Spool) error { return s.WriteAnswer("c", &Answer{Job: "j", Question: "q", Answer: "a"}) },
			`chat "c": chats/c is a symlink, not a directory; remove it (ls -l `, ""},
		{"read answer, chats out", "chats", "OUT", func(s *Spool) error { _, err := s.ReadAnswer("c"); return err },
			`chat "c": chats is a symlink out of the spool, not a directory; remove it (ls -l `, ""},
		{"lock, chat dir out", "chats/c", "OUT", func(s *Spool) error {
			f, _, err := s.LockChat("c")
			if f != nil {
				f.Close()
			}
			return err
		}, `chat "c": chats/c is a symlink out of the spool, not a directory; remove it (ls -l `, ""},
		{"clear, progress out", "progress", "OUT", func(s *Spool) error { return s.ClearChat("c") },
			`chat "c": progress is a symlink out of the spool, not a directory; remove it (ls -l `, ""},
		// A link that stays in the tree is refused too: os.Root would
		// follow it, and the submit removed another chat's answer.
		{"clear, chat dir in", "chats/c", "other", func(s *Spool) error { return s.ClearChat("c") },
			`chat "c": chats/c is a symlink, not a directory; remove it (ls -l `, "chats/other/answer.json"},
		{"clear, progress in", "progress", "chats/other", func(s *Spool) error { return s.ClearChat("c") },
			`chat "c": progress is a symlink, not a directory; remove it (ls -l `, "chats/other/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Create(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			out := t.TempDir()
			os.WriteFile(filepath.Join(out, "c"), []byte("outside"), 0o644)
			os.Mkdir(filepath.Join(out, "c.d"), 0o755)
			if tc.keep != "" {
				os.MkdirAll(filepath.Dir(s.Path(tc.keep)), 0o750)
				os.WriteFile(s.Path(tc.keep), []byte("another chat's"), 0o640)
			}
			target := tc.target
			if target == "OUT" {
				target = out
			}
			link := filepath.Join(dir, filepath.FromSlash(tc.link))
			os.RemoveAll(link)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			err = tc.op(s)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want+link+")") {
				t.Errorf("error %q\nwant %q", err, tc.want+link+")")
			}
			var esc *escapeError
			if !errors.As(err, &esc) || errors.Unwrap(esc) == nil {
				t.Errorf("error %q does not wrap the operation's", err)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "c")); string(b) != "outside" {
				t.Errorf("the file outside was changed: %q", b)
			}
			if b, err := os.ReadFile(s.Path(tc.keep)); tc.keep != "" && string(b) != "another chat's" {
				t.Errorf("%s: %q, %v; want it untouched", tc.keep, b, err)
			}
		})
	}
}
