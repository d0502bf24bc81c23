package watchd

import (
	"net"
	"net/http"
	"strings"
)

// GuardHost serves h only to requests whose Host header names this server
// as a browser on this machine would: an IP address (a page can reach one
// only by its own origin), "localhost", or one of allow (the names a
// reverse proxy in front sends; "*" lets every name through). Anything
// else gets 421 Misdirected Request.
//
// Why: the documents hold what people asked and answered. A page the
// operator visits can point a name of its own at 127.0.0.1 (DNS
// rebinding), and the browser then sends that name as Host while it reads
// this server as the page's own origin. Refusing names we were not told of
// closes that door; a port is not checked, since the name alone decides
// the origin's owner.
func GuardHost(h http.Handler, allow []string) http.Handler {
	names := make(map[string]bool)
	any := false
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a), "."))
		if a == "*" {
			any = true
		}
		if a != "" {
			names[a] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if any || HostAllowed(r.Host, names) {
			h.ServeHTTP(w, r)
			return
		}
		httpError(w, http.StatusMisdirectedRequest, "watchd: host %q is not served here (only loopback names and IP addresses; a reverse proxy's name needs --allow-host)", clipHost(r.Host))
	})
}

// HostAllowed reports whether a request's Host header (name or name:port)
// is an IP address, localhost, or one of names (lower case).
func HostAllowed(host string, names map[string]bool) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	switch {
	case name == "":
		// HTTP/1.0 without a Host: not a browser (every browser sends one).
		return true
	case net.ParseIP(name) != nil:
		return true
	case name == "localhost":
		return true
	}
	return names[name]
}

func clipHost(h string) string {
	if len(h) > 80 {
		return h[:80] + "..."
	}
	return h
}
