package watchd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSocketInUse is wrapped when another server answers on the socket.
var ErrSocketInUse = errors.New("another server answers there (is another watchd serve running? pick another --socket)")

// UnixListener is watchd serve's unix socket: a listener, and the
// directory it was bound in, held open so that the socket can be removed
// at the end by that directory's handle (never by a path that may have
// changed meanwhile).
type UnixListener struct {
	*net.UnixListener
	Path string // the socket's path, for messages
	dir  *os.File
	name string
	ino  uint64
	once sync.Once
}

// ListenUnix binds a unix socket at name in dir (an open directory). A
// socket already there that no server answers (the last daemon was
// killed) is replaced; one that answers is another daemon's, and anything
// else is refused, never removed. The socket is made with mode, then
// given gid (if not -1); when the group cannot be given, it is made the
// owner's alone (0600). path is the socket's path, for messages. dir is
// kept, and closed by Close.
//
// The bind goes through the directory's handle (/proc/self/fd/N/name), so
// that a link swapped in for a directory of the path cannot move it, and a
// path longer than a socket address may be (108 bytes) still works.
func ListenUnix(dir *os.File, name, path string, mode os.FileMode, gid int) (*UnixListener, error) {
	fd := int(dir.Fd())
	via := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return nil, fmt.Errorf("socket %s: something else stands there (not a socket); move it aside", path)
	case err == nil:
		c, derr := net.DialTimeout("unix", via, 2*time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: %w", path, ErrSocketInUse)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("socket %s: %w", path, derr)
		}
		if err := unix.Unlinkat(fd, name, 0); err != nil && !errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("socket %s: removing the stale socket: %w", path, err)
		}
	case !errors.Is(err, syscall.ENOENT):
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	// bind(2) makes the socket with the umask's mode: the one place to
	// give it its mode before anyone can connect. The umask is the
	// process's; it is changed for this call only, at start-up.
	old := syscall.Umask(int(0o777 &^ mode.Perm()))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: via, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if gid >= 0 && int(st.Gid) != gid {
		if unix.Fchownat(fd, name, -1, gid, unix.AT_SYMLINK_NOFOLLOW) != nil {
			if err := unix.Fchmodat(fd, name, 0o600, 0); err != nil {
				ln.Close()
				unix.Unlinkat(fd, name, 0)
				return nil, fmt.Errorf("socket %s: %w", path, err)
			}
		}
	}
	return &UnixListener{UnixListener: ln, Path: path, dir: dir, name: name, ino: st.Ino}, nil
}

// OpenSocketDir opens the directory of a socket path given by an operator
// (--socket), for ListenUnix.
func OpenSocketDir(path string) (*os.File, string, error) {
	dir, err := os.OpenFile(filepath.Dir(path), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", fmt.Errorf("socket %s: %w", path, err)
	}
	return dir, filepath.Base(path), nil
}

// Close stops listening and removes the socket, if it is still the one
// bound here.
func (l *UnixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		var st unix.Stat_t
		fd := int(l.dir.Fd())
		if unix.Fstatat(fd, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == l.ino {
			unix.Unlinkat(fd, l.name, 0)
		}
		l.dir.Close()
	})
	return err
}
