package spool

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/vmspool/vmspool/internal/atomicfile"
)

// watchd/ holds what `watchd serve` shares with the people who may read
// the spool (docs/operations.md, "Who may read the HTTP surface"): its
// unix socket, which the spool's group may connect to, and the token its
// TCP listener asks for, which the spool's group may read. Both are as
// open as the tree itself and no more: whoever can read the chats in the
// tree can read them over HTTP, nobody else.
const (
	ServeDir    = "watchd"
	ServeSocket = ServeDir + "/serve.sock"
	ServeToken  = ServeDir + "/token"
)

// MaxTokenFile bounds a token file's read.
const MaxTokenFile = 4 << 10

// ErrBadToken is wrapped when a token (or a token file) is not one.
var ErrBadToken = errors.New("not a token (16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -)")

// CheckToken returns an error wrapping ErrBadToken unless tok can be a
// token: long enough not to be guessed, and made of characters that
// travel unchanged in a header, a cookie and a URL's query.
func CheckToken(tok string) error {
	if len(tok) < 16 || len(tok) > 512 {
		return ErrBadToken
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !alnum(c) && !strings.ContainsRune("._~+/=-", rune(c)) {
			return ErrBadToken
		}
	}
	return nil
}

// ServeAccess says who besides the spool's owner may reach watchd/: the
// root's group, when the root lets its group in (mode 0750, the tree's),
// else nobody.
type ServeAccess struct {
	Uid   int // the root's owner
	Gid   int
	Group bool
}

// DirMode is watchd/'s mode.
func (a ServeAccess) DirMode() os.FileMode {
	if a.Group {
		return 0o750
	}
	return 0o700
}

// FileMode is the token's mode.
func (a ServeAccess) FileMode() os.FileMode {
	if a.Group {
		return 0o640
	}
	return 0o600
}

// SocketMode is the socket's: connecting takes write permission.
func (a ServeAccess) SocketMode() os.FileMode {
	if a.Group {
		return 0o660
	}
	return 0o600
}

// ServeAccess reads the root's group and whether it lets its group in.
func (s *Spool) ServeAccess() (ServeAccess, error) {
	fi, err := s.root.Stat(".")
	if err != nil {
		return ServeAccess{}, fmt.Errorf("spool %s: %w", s.RootPath, err)
	}
	a := ServeAccess{Uid: -1, Gid: -1, Group: fi.Mode().Perm()&0o050 == 0o050}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.Uid, a.Gid = int(st.Uid), int(st.Gid)
	}
	return a, nil
}

// OpenServeDir makes watchd/ if it is missing (the tree's mode, and the
// root's group: a root that shuts its group out shuts it out of watchd/
// too) and opens it, refusing anything but a directory in its place. The caller binds its socket in it through the handle, by
// the handle's /proc/self/fd path, which neither a link nor a long
// spool path can turn elsewhere; Close it after.
func (s *Spool) OpenServeDir() (*os.File, ServeAccess, error) {
	a, err := s.ServeAccess()
	if err != nil {
		return nil, a, err
	}
	_, serr := s.root.Lstat(ServeDir)
	if err := s.mkdir(ServeDir); err != nil {
		return nil, a, err
	}
	if errors.Is(serr, fs.ErrNotExist) {
		if !a.Group {
			s.root.Chmod(ServeDir, a.DirMode())
		}
		if a.Gid >= 0 {
			// Best effort: a group the daemon is not in stays its own,
			// and the modes keep that group out all the same.
			s.root.Lchown(ServeDir, -1, a.Gid)
		}
	}
	f, err := openDir(s.root, ServeDir)
	if err != nil {
		return nil, a, fmt.Errorf("spool %s: %w (want a directory)", s.Path(ServeDir), err)
	}
	return f, a, nil
}

// ReadServeToken reads watchd/token: a plain file (never a link), at most
// MaxTokenFile bytes, holding one token and perhaps a newline. A missing
// file wraps fs.ErrNotExist.
func (s *Spool) ReadServeToken() (string, fs.FileInfo, error) {
	b, fi, err := readFile(s.root, ServeToken, MaxTokenFile)
	if err != nil {
		return "", fi, fmt.Errorf("spool %s: %w", s.Path(ServeToken), err)
	}
	tok := strings.TrimSpace(string(b))
	if err := CheckToken(tok); err != nil {
		return "", fi, fmt.Errorf("spool %s: %w", s.Path(ServeToken), err)
	}
	return tok, fi, nil
}

// ServeToken returns the token of watchd serve's TCP listener, making
// watchd/token with a new random one (32 bytes from the kernel, in hex)
// if there is none. The token is written into a temporary given the
// root's group and ServeAccess's mode, fsync'd, then taken (never over
// another's: two daemons starting at once agree on one token), so a
// reader finds the whole token or no file, never an empty one. An
// existing file is refused if others may read it, or anyone but its
// owner may write it, or its owner is neither euid nor root: a token is
// only as secret as its file.
func (s *Spool) ServeToken(euid int) (tok string, created bool, err error) {
	dir, a, err := s.OpenServeDir()
	if err != nil {
		return "", false, err
	}
	defer dir.Close()
	for try := 0; ; try++ {
		tok, fi, err := s.ReadServeToken()
		if err == nil {
			return tok, false, checkTokenFile(s.Path(ServeToken), fi, euid, a.Uid)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", false, err
		}
		tok, err = s.makeServeToken(int(dir.Fd()), a)
		if errors.Is(err, fs.ErrExist) && try < 50 {
			continue // another daemon's, taken a moment ago: read it
		}
		return tok, err == nil, err
	}
}

// makeServeToken takes watchd/token (in the directory dirfd) with a new
// token, or fails wrapping fs.ErrExist if another stands there.
func (s *Spool) makeServeToken(dirfd int, a ServeAccess) (string, error) {
	var rnd [32]byte
	if _, err := (kernelRandom{}).Read(rnd[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(rnd[:])
	data := []byte(tok + "\n")
	name := path.Base(ServeToken)
	// Root's token takes watchd/'s owner, as root's files do (dirOwner),
	// and the root's group when it lets its group in.
	uid, gid := -1, -1
	if own := dirOwner(dirfd); own.set {
		uid, gid = own.uid, own.gid
	}
	if a.Group && a.Gid >= 0 {
		gid = a.Gid
	}
	opts := []atomicfile.Option{atomicfile.InDir(dirfd), atomicfile.WithMode(a.FileMode())}
	if uid >= 0 || gid >= 0 {
		opts = append(opts, atomicfile.WithOwner(uid, gid))
	}
	err := writeAt(name, data, &s.taking, opts)
	if err != nil && !errors.Is(err, fs.ErrExist) && len(opts) > 2 {
		// The chown may be what failed (a sandbox may deny it
		// altogether: systemd's @privileged; it is asked only where the
		// group differs): then the token is its owner's alone.
		err = writeAt(name, data, &s.taking, []atomicfile.Option{atomicfile.InDir(dirfd), atomicfile.WithMode(0o600)})
	}
	if err != nil {
		return "", fmt.Errorf("spool %s: %w", s.Path(ServeToken), err)
	}
	return tok, nil
}

func checkTokenFile(path string, fi fs.FileInfo, euid, spoolOwner int) error {
	perm := fi.Mode().Perm()
	if perm&0o027 != 0 {
		return fmt.Errorf("token file %s: mode %04o lets %s: %w; chmod 0640 it, or remove it and restart watchd for a new one",
			path, perm, map[bool]string{true: "others read it", false: "its group write it"}[perm&0o007 != 0], ErrBadToken)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid && st.Uid != 0 && int(st.Uid) != spoolOwner {
		return fmt.Errorf("token file %s: owned by uid %d, not by this daemon's user (%d), the spool's owner or root: %w", path, st.Uid, euid, ErrBadToken)
	}
	return nil
}
