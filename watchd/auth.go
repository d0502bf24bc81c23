package watchd

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// Auth asks every request of watchd serve's TCP listener for the token
// (spool.ServeToken), sent as "Authorization: Bearer T". A browser is
// given the token in the page's address as watchd serve prints it,
// http://HOST:PORT/#token=T: a fragment, which the browser sends to no
// server. The page's script takes it from there, keeps it in the tab's
// sessionStorage (its origin's alone: scheme, host and port; and the
// tab's, so that it ends with the tab), takes it out of the address bar,
// and sends it with each request it makes.
//
// There is no cookie, on purpose. A browser keeps cookies per host, not
// per port: a cookie watchd set would be sent to every other server on
// the same host, run by anyone, whenever any page showed a link or an
// image of theirs. A header the page's script adds is sent only where the
// script sends it, and no page of another origin can make the browser add
// it (that needs a CORS preflight, which watchd never answers), so a
// request that carries the token needs no Origin check either.
//
// What answers without a token: the page itself and its files (GET / and
// GET /FILE: they hold no chat's words; the script asks for the token
// before it reads anything), and /metrics (it counts, and holds no chat's
// words). The unix socket needs none of this: its mode is its lock.
//
// A request refused for want of the token is answered and its connection
// closed ("Connection: close"): a client without the token holds no
// connection open after its first request.
type Auth struct {
	Token string
}

// bearer reads r's "Authorization: Bearer" header: whether it has one,
// and whether it carries this server's token.
func (a *Auth) bearer(r *http.Request) (sent, good bool) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok, ok && a.matches(strings.TrimSpace(v))
}

func (a *Auth) matches(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(a.Token)) == 1
}

// public reports whether a request may be answered without the token: the
// page and its files, and /metrics.
func public(r *http.Request) bool {
	if r.URL.Path == "/metrics" {
		return true
	}
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !strings.HasPrefix(r.URL.Path, "/") {
		return false
	}
	return r.URL.Path == "/" || (!strings.Contains(r.URL.Path[1:], "/") && r.URL.Path != "/chats")
}

// Handler guards h.
func (a *Auth) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Path == "/" || r.URL.Path == "/index.html"
		if q := r.URL.Query(); page && q.Has("token") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			a.login(w, r, q.Get("token"))
			return
		}
		sent, good := a.bearer(r)
		if public(r) {
			// Without the token, a connection serves this one request:
			// a client that asks for the page's files every few seconds
			// must not hold a connection (LimitedListener) for good.
			if !good {
				w.Header().Set("Connection", "close")
			}
			h.ServeHTTP(w, r)
			return
		}
		switch {
		case !sent:
			unauthorized(w, "watchd: a token is needed. In a browser, open the address watchd serve printed "+
				"(http://HOST:PORT/#token=...); a program sends \"Authorization: Bearer <token>\". "+
				"The token is in the spool's watchd/token, readable by the spool's group (docs/operations.md)")
		case !good:
			unauthorized(w, "watchd: the token sent is not this server's (it may have been rotated: read it again)")
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// login answers the older form of the page's address, /?token=T (a
// bookmark, a script of before): the browser is sent on to ./#token=T,
// where the page's script takes the token, so that it leaves the address
// bar and the history. A wrong token is refused: a page elsewhere could
// otherwise send a person here with a token of its choosing.
func (a *Auth) login(w http.ResponseWriter, r *http.Request, tok string) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !a.matches(tok) {
		unauthorized(w, "watchd: the token in this address is not this server's (it may have been rotated: "+
			"ask for the new address)")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	// Relative: behind a proxy's path prefix it stays under it.
	w.Header().Set("Location", "./#token="+url.QueryEscape(a.Token))
	w.WriteHeader(http.StatusSeeOther)
}

// unauthorized refuses a request for want of the token, and closes its
// connection once answered.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="watchd"`)
	w.Header().Set("Connection", "close")
	w.Header().Set("Cache-Control", "no-store")
	httpError(w, http.StatusUnauthorized, "%s", msg)
}

// SameOrigin reports whether a browser's request comes from a page of
// this server: its Origin names the host it was sent to, and its
// Sec-Fetch-Site, when the browser sends one, says same-origin. A request
// without an Origin is refused (every browser sends one with a POST).
func SameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// BrowserSameOrigin reports whether a request either comes from no
// browser (it carries neither Origin nor Sec-Fetch-Site: a program, curl,
// the Python client) or comes from a page of this server (SameOrigin).
func BrowserSameOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return true
	}
	return SameOrigin(r)
}
