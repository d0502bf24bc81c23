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

// LimitedListener caps the connections a listener keeps open: Total in
// all, and PerAddr from one client address. A connection over a cap is
// accepted and closed at once, so that it holds no descriptor and the
// kernel's backlog does not fill. Why: each connection is a descriptor of
// watchd's, and the spool's documents are read through descriptors too;
// a local user who opened thousands (3,000 were seen held) left watchd
// with none, and the token's holder got no answer for a minute. With the
// 401 closed at once (Auth) and a request's header due in 5 s
// (HTTPServer), a client without the token holds a connection for
// seconds at most; the caps bound what it holds meanwhile.
//
// What is not promised: service. A local user may still fill the cap
// with connections that send nothing, for 5 s at a time; the caps keep
// watchd's descriptors, not its answers, from them. Loopback clients are
// counted in Total only when SharedLoopback is set: every local user
// comes from 127.0.0.1, so a per-address cap there is the total by
// another name, and a busy Open WebUI on the host would meet it first.
type LimitedListener struct {
	net.Listener
	Total, PerAddr int
	SharedLoopback bool
	// Refused is called once when a cap begins to refuse, with the cap's
	// name; nil: nothing. It is called again only after a connection
	// has been accepted since.
	Refused func(which string)

	mu      sync.Mutex
	open    int
	byAddr  map[string]int
	refused bool
}

// Accept returns the next connection within the caps.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := ""
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && !(l.SharedLoopback && a.IP.IsLoopback()) {
			host = a.IP.String()
		}
		if which := l.take(host); which != "" {
			c.Close()
			if which != "-" && l.Refused != nil {
				l.Refused(which)
			}
			continue
		}
		return &limitedConn{Conn: c, l: l, host: host}, nil
	}
}

// take counts a connection in, or names the cap it is over ("" when it
// is within both; "-" when a refusal of this run was already named), so
// that Refused hears of a cap once per run of refusals.
func (l *LimitedListener) take(host string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	which := ""
	switch {
	case l.Total > 0 && l.open >= l.Total:
		which = "total"
	case host != "" && l.PerAddr > 0 && l.byAddr[host] >= l.PerAddr:
		which = "per address"
	}
	if which != "" {
		if l.refused {
			return "-"
		}
		l.refused = true
		return which
	}
	l.refused = false
	l.open++
	if host != "" {
		if l.byAddr == nil {
			l.byAddr = map[string]int{}
		}
		l.byAddr[host]++
	}
	return ""
}

func (l *LimitedListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if host != "" {
		if l.byAddr[host]--; l.byAddr[host] <= 0 {
			delete(l.byAddr, host)
		}
	}
}

// Open is the number of connections open now.
func (l *LimitedListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

type limitedConn struct {
	net.Conn
	l    *LimitedListener
	host string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}

// CloseWrite reaches the TCP connection's, so that net/http's half-close
// before a closing response's end still happens.
func (c *limitedConn) CloseWrite() error {
	if w, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return w.CloseWrite()
	}
	return nil
}

// SetWriteBuffer reaches the TCP connection's (limitSendBuffer).
func (c *limitedConn) SetWriteBuffer(n int) error {
	if w, ok := c.Conn.(interface{ SetWriteBuffer(int) error }); ok {
		return w.SetWriteBuffer(n)
	}
	return nil
}
