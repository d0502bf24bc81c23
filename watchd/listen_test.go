package watchd

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestLimitedListener: a connection over either cap is closed at once
// (the client reads EOF), one closed frees its place, and Refused hears
// of a run of refusals once.
func TestLimitedListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []string
	l := &LimitedListener{Listener: raw, Total: 3, PerAddr: 2,
		Refused: func(which string) { mu.Lock(); told = append(told, which); mu.Unlock() }}
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Skipf("dialing from %s: %v", from, err)
		}
		return c
	}
	// closedAtOnce reports whether the server closed c without a word.
	closedAtOnce := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	take := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(2 * time.Second):
			t.Fatal("a connection within the caps was not accepted")
			return nil
		}
	}
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	s1 := take()
	take()
	if a3 := dial("127.0.0.1"); !closedAtOnce(a3) {
		t.Error("a third connection from one address was kept (PerAddr 2)")
	}
	b1 := dial("127.0.0.2")
	take()
	if b2 := dial("127.0.0.2"); !closedAtOnce(b2) {
		t.Error("a fourth connection in all was kept (Total 3)")
	}
	if b3 := dial("127.0.0.3"); !closedAtOnce(b3) {
		t.Error("a fifth connection in all was kept (Total 3)")
	}
	if n := l.Open(); n != 3 {
		t.Errorf("Open: %d; want 3", n)
	}
	s1.Close()
	a1.Close()
	dial("127.0.0.2")
	take()
	mu.Lock()
	if len(told) != 2 || told[0] != "per address" || told[1] != "total" {
		t.Errorf("Refused heard %q; want per address, then total once", told)
	}
	mu.Unlock()
	_, _ = a2, b1
}
