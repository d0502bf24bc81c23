package spool

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestServeToken(t *testing.T) {
	s := testSpool(t)
	tok, created, err := s.ServeToken(os.Geteuid())
	if err != nil || !created || CheckToken(tok) != nil || len(tok) != 64 {
		t.Fatalf("first token: %q, created %v, %v", tok, created, err)
	}
	for name, want := range map[string]os.FileMode{ServeDir: 0o750, ServeToken: 0o640} {
		fi, err := os.Lstat(s.Path(name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, fi.Mode(), err, want)
		}
	}
	again, created, err := s.ServeToken(os.Geteuid())
	if err != nil || created || again != tok {
		t.Errorf("second call: %q, created %v, %v; want the same token", again, created, err)
	}

	// A token is only as secret as its file.
	os.Chmod(s.Path(ServeToken), 0o644)
	if _, _, err := s.ServeToken(os.Geteuid()); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "others read it") {
		t.Errorf("a token others may read: %v", err)
	}
	os.Chmod(s.Path(ServeToken), 0o660)
	if _, _, err := s.ServeToken(os.Geteuid()); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token its group may write: %v", err)
	}
	// A link in its place is never followed, nor replaced.
	os.Remove(s.Path(ServeToken))
	secret := t.TempDir() + "/secret"
	os.WriteFile(secret, []byte(strings.Repeat("s", 64)), 0o600)
	os.Symlink(secret, s.Path(ServeToken))
	if tok, _, err := s.ServeToken(os.Geteuid()); err == nil {
		t.Errorf("a symlinked token file was read: %q", tok)
	}
	if tok, _, err := s.ReadServeToken(); err == nil {
		t.Errorf("ReadServeToken followed a link: %q", tok)
	}
	os.Remove(s.Path(ServeToken))
	os.WriteFile(s.Path(ServeToken), []byte("short\n"), 0o640)
	if _, _, err := s.ReadServeToken(); !errors.Is(err, ErrBadToken) {
		t.Errorf("a short token: %v", err)
	}
}

func TestServeAccessFollowsTheRoot(t *testing.T) {
	s := testSpool(t)
	os.Chmod(s.Dir, 0o700)
	if _, _, err := s.ServeToken(os.Geteuid()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{ServeDir: 0o700, ServeToken: 0o600} {
		if fi, err := os.Lstat(s.Path(name)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("root 0700: %s: %v, %v; want %v", name, fi.Mode(), err, want)
		}
	}
}

func TestCheckToken(t *testing.T) {
	for tok, ok := range map[string]bool{
		strings.Repeat("a", 16): true, strings.Repeat("a", 15): false, strings.Repeat("a", 513): false,
		"abcdefghijklmnop.~+/=-_": true, "abcdefghijklmnop q": false, "abcdefghijklmnop;q": false,
		"abcdefghijklmnop\"q": false, "abcdefghijklmnopé": false,
	} {
		if got := CheckToken(tok) == nil; got != ok {
			t.Errorf("CheckToken(%q): %v; want %v", tok, got, ok)
		}
	}
}
