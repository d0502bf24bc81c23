package tests

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchd serve asks for its token over TCP (docs/operations.md, "Who may
// read the HTTP surface"). The tests that are about something else reach
// it as any program given the token does: every request of the default
// HTTP client, and every raw request of abuseRaw and attackStream, to an
// address a test registered carries "Authorization: Bearer <token>".
// Tests of the token itself use a client of their own.
var serveTokens sync.Map // host:port -> token

// serveRegister reads the token watchd serve made in dir's watchd/token
// and registers it for addr (host:port).
func serveRegister(t testing.TB, dir, addr string) string {
	t.Helper()
	var tok string
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd serve's token", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "watchd", "token"))
		tok = strings.TrimSpace(string(b))
		return err == nil && tok != ""
	})
	serveTokens.Store(addr, tok)
	t.Cleanup(func() { serveTokens.Delete(addr) })
	return tok
}

// serveToken is the token registered for addr, or "".
func serveToken(addr string) string {
	if v, ok := serveTokens.Load(addr); ok {
		return v.(string)
	}
	return ""
}

// authHeader is the header line a raw request to addr carries ("" if none).
func authHeader(addr string) string {
	if tok := serveToken(addr); tok != "" {
		return "Authorization: Bearer " + tok + "\r\n"
	}
	return ""
}

// withToken adds the registered token to raw, a request as written,
// after its request line.
func withToken(addr, raw string) string {
	line, rest, ok := strings.Cut(raw, "\r\n")
	if !ok {
		return raw
	}
	return line + "\r\n" + authHeader(addr) + rest
}

type tokenTransport struct{ next http.RoundTripper }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok := serveToken(r.URL.Host); tok != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return tt.next.RoundTrip(r)
}

func init() {
	http.DefaultTransport = tokenTransport{http.DefaultTransport}
}
