package spool

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
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
	os.Chmod(s.RootPath, 0o700)
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

// Daemons starting at once agree on one token, and a reader (watchd
// follow, the page's client) never finds the file empty or half-written:
// the token arrives whole, by a take, or not at all.
func TestServeTokenArrivesWhole(t *testing.T) {
	s := testSpool(t)
	for round := 0; round < 200; round++ {
		os.Remove(s.Path(ServeToken))
		var wg sync.WaitGroup
		toks := make([]string, 3)
		errs := make([]error, 3)
		created := make([]bool, 3)
		for i := range toks {
			o, err := Open(s.RootPath)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				toks[i], created[i], errs[i] = o.ServeToken(os.Geteuid())
			}()
		}
		for {
			tok, _, err := s.ReadServeToken()
			if err == nil {
				if CheckToken(tok) != nil {
					t.Fatalf("round %d: read %q", round, tok)
				}
				break
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("round %d: a reader found the token file but no token: %v", round, err)
			}
		}
		wg.Wait()
		made := 0
		for i := range toks {
			if errs[i] != nil || toks[i] != toks[0] {
				t.Fatalf("round %d: daemon %d: %q, %v; want %q", round, i, toks[i], errs[i], toks[0])
			}
			if created[i] {
				made++
			}
		}
		if made != 1 {
			t.Fatalf("round %d: %d daemons say they made the token", round, made)
		}
	}
}
