package tests

// The one-line messages of bad trees: a symlink planted where the spool
// wants one of its own directories is named, with what to do about it,
// rather than reported as os.Root's "path escapes from parent".

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

func TestMessagesSymlinkOutOfSpool(t *testing.T) {
	for _, tc := range []struct {
		name string
		link string // the name of the tree planted as a symlink
		chat string
	}{
		{name: "chat-dir", link: "chats/c", chat: "c"},
		{name: "progress-dir", link: "progress", chat: "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newSpool(t)
			for _, d := range []string{spool.ProgressDir, spool.ChatsDir} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
					t.Fatal(err)
				}
			}
			// Outside, what a submit would remove if it followed the link.
			out := t.TempDir()
			for _, name := range []string{spool.AnswerFile, tc.chat} {
				if err := os.WriteFile(filepath.Join(out, name), []byte("outside\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, filepath.FromSlash(tc.link))
			os.Remove(link)
			if err := os.Symlink(out, link); err != nil {
				t.Fatal(err)
			}

			code, stdout, stderr := spoolcliRun(t, nil, "--spool", dir, "submit", "--chat", tc.chat, "--", "true")
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing (no job)", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			want := `chat "` + tc.chat + `": ` + tc.link + " is a symlink out of the spool, not a directory; remove it (ls -l " + link + ")"
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr %q\nwant it to say %q", stderr, want)
			}
			if strings.Contains(stderr, "escapes from parent") {
				t.Errorf("stderr %q is os.Root's message", stderr)
			}

			// Nothing outside was touched, nothing of the job is left.
			for _, name := range []string{spool.AnswerFile, tc.chat} {
				if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != "outside\n" {
					t.Errorf("%s outside the spool: %q, %v; want it untouched", name, b, err)
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), spool.ExtSpec) || strings.HasSuffix(e.Name(), spool.ExtReady) {
					t.Errorf("%s left in the spool by a refused submit", e.Name())
				}
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the planted symlink %s: %v, %v; want it left for the operator", link, fi, err)
			}
		})
	}
}
