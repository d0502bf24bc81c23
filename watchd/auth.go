package watchd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// Auth asks every request of watchd serve's TCP listener for the token
// (spool.ServeToken), as Jupyter does: the server prints, once, the
// page's address carrying it (/?token=T); opening that address trades
// the token for a cookie (HttpOnly, SameSite=Strict) and sends the browser
// on to the page without it, and every request after carries the cookie.
// A program sends "Authorization: Bearer T" instead. The unix socket
// needs none of this: its mode is its lock.
//
// /metrics answers without a token: it counts, and holds no chat's words.
//
// Requests that change something (anything but GET, HEAD and OPTIONS:
// the page's answer to a question, POST /chats/C/answer) must, when the cookie is their credential, come from the
// page's own origin: SameSite=Strict keeps a cross-site request from
// carrying the cookie, and the Origin check refuses one from another
// origin of the same site (another port of 127.0.0.1). A bearer token
// needs no such check: no page can make a browser send one across origins
// without the server's consent (CORS), which watchd never gives.
type Auth struct {
	Token string
}

// CookieName is the cookie that carries the token: named after a hash of
// it, so that two watchd on one host (on other ports, whose cookies a
// browser does not keep apart) each find their own, and a rotated token's
// cookie is simply left unused.
func (a *Auth) CookieName() string {
	h := sha256.Sum256([]byte("watchd cookie\x00" + a.Token))
	return "watchd-" + hex.EncodeToString(h[:6])
}

func (a *Auth) matches(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(a.Token)) == 1
}

// Handler guards h.
func (a *Auth) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			h.ServeHTTP(w, r)
			return
		}
		page := r.URL.Path == "/" || r.URL.Path == "/index.html"
		if q := r.URL.Query(); page && q.Has("token") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			a.login(w, r, q.Get("token"))
			return
		}
		bearer := false
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if !a.matches(strings.TrimSpace(v)) {
				unauthorized(w, "watchd: the token sent is not this server's (it may have been rotated: read it again)")
				return
			}
			bearer = true
		}
		if !bearer {
			c, err := r.Cookie(a.CookieName())
			if err != nil || !a.matches(c.Value) {
				unauthorized(w, "watchd: a token is needed. In a browser, open the address watchd serve printed "+
					"(http://HOST:PORT/?token=...); a program sends \"Authorization: Bearer <token>\". "+
					"The token is in the spool's watchd/token, readable by the spool's group (docs/operations.md)")
				return
			}
			if !safeMethod(r.Method) && !SameOrigin(r) {
				httpError(w, http.StatusForbidden, "watchd: %s from another origin refused", r.Method)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// login trades the token of the page's address for the cookie, and sends
// the browser on to the page without it, so that the token leaves the
// address bar and the history. A wrong token is refused: a page elsewhere
// could otherwise send a person here with a token of its choosing.
func (a *Auth) login(w http.ResponseWriter, r *http.Request, tok string) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !a.matches(tok) {
		unauthorized(w, "watchd: the token in this address is not this server's (it may have been rotated: "+
			"ask for the new address)")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: a.CookieName(), Value: a.Token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.Header().Set("Cache-Control", "no-store")
	// Relative: behind a proxy's path prefix it stays under it.
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="watchd"`)
	w.Header().Set("Cache-Control", "no-store")
	httpError(w, http.StatusUnauthorized, "%s", msg)
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
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
