package watchd

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		host, origin, site string
		want               bool
	}{
		{"127.0.0.1:8377", "http://127.0.0.1:8377", "same-origin", true},
		{"127.0.0.1:8377", "http://127.0.0.1:8377", "", true},
		{"watch.example.org", "https://watch.example.org", "same-origin", true},
		{"127.0.0.1:8377", "http://127.0.0.1:9999", "same-site", false},
		{"127.0.0.1:8377", "http://127.0.0.1:8377", "cross-site", false},
		{"127.0.0.1:8377", "http://attacker.example", "", false},
		{"127.0.0.1:8377", "", "", false},
		{"127.0.0.1:8377", "null", "", false},
		{"127.0.0.1:8377", "file://127.0.0.1:8377", "", false},
	} {
		r := httptest.NewRequest("POST", "http://"+c.host+"/x", nil)
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			r.Header.Set("Sec-Fetch-Site", c.site)
		}
		if got := SameOrigin(r); got != c.want {
			t.Errorf("Host %s, Origin %q, Sec-Fetch-Site %q: %v; want %v", c.host, c.origin, c.site, got, c.want)
		}
	}
}

func TestAuth(t *testing.T) {
	a := &Auth{Token: strings.Repeat("ab", 32)}
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
	do := func(method, target string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	// The cookie a browser kept from before, or any other: no credential.
	cookie := "watchd-0123456789ab=" + a.Token
	for _, c := range []struct {
		method, target string
		hdr            []string
		want           int
	}{
		{"GET", "/chats", nil, 401},
		{"GET", "/chats/c1", nil, 401},
		{"GET", "/chats/c1/events", nil, 401},
		{"HEAD", "/chats", nil, 401},
		{"GET", "/metrics", nil, 299},
		{"GET", "/", nil, 299},
		{"GET", "/app.js", nil, 299},
		{"POST", "/", nil, 401},
		{"GET", "/chats", []string{"Authorization", "Bearer " + a.Token}, 299},
		{"GET", "/chats", []string{"Authorization", "Bearer " + a.Token + "x"}, 401},
		{"GET", "/chats", []string{"Authorization", "Basic " + a.Token}, 401},
		{"GET", "/chats", []string{"Cookie", cookie}, 401},
		{"GET", "/chats?token=" + a.Token, nil, 401},
		{"GET", "/?token=" + a.Token, nil, 303},
		{"GET", "/index.html?token=" + a.Token, nil, 303},
		{"GET", "/?token=nope", nil, 401},
		{"POST", "/?token=" + a.Token, nil, 401},
		{"POST", "/chats/c1/answer", []string{"Cookie", cookie, "Origin", "http://example.com"}, 401},
		{"POST", "/chats/c1/answer", []string{"Authorization", "Bearer " + a.Token}, 299},
		// An absolute-form request with no path: refused, not a panic.
		{"GET", "http://127.0.0.1:8377", nil, 401},
	} {
		w := do(c.method, c.target, c.hdr...)
		if w.Code != c.want {
			t.Errorf("%s %s %q: %d %q; want %d", c.method, c.target, c.hdr, w.Code, w.Body, c.want)
		}
		if sc := w.Header().Get("Set-Cookie"); sc != "" {
			t.Errorf("%s %s: a cookie set (%q): a browser would send it to every port of the host", c.method, c.target, sc)
		}
		if w.Code == 401 && w.Header().Get("Connection") != "close" {
			t.Errorf("%s %s: a 401 keeps its connection open", c.method, c.target)
		}
	}
	// The page's files answer without the token, one request a
	// connection; with the token, a connection is kept.
	if w := do("GET", "/app.js"); w.Header().Get("Connection") != "close" {
		t.Error("a public file served without the token keeps its connection open")
	}
	if w := do("GET", "/app.js", "Authorization", "Bearer "+a.Token); w.Header().Get("Connection") == "close" {
		t.Error("a public file served with the token closes its connection")
	}
	w := do("GET", "/?token="+a.Token)
	if loc := w.Header().Get("Location"); loc != "./#token="+a.Token {
		t.Errorf("the address with ?token= is sent on to %q; want ./#token=T", loc)
	}
}

func TestParseRemote(t *testing.T) {
	for _, c := range []struct {
		in, socket, url, token string
		bad                    bool
	}{
		{in: "unix:/var/spool/vm/watchd/serve.sock", socket: "/var/spool/vm/watchd/serve.sock", url: "http://localhost/chats"},
		{in: "unix:///run/w.sock", socket: "/run/w.sock", url: "http://localhost/chats"},
		{in: "/run/w.sock", socket: "/run/w.sock", url: "http://localhost/chats"},
		{in: "http://127.0.0.1:8377", url: "http://127.0.0.1:8377/chats"},
		{in: "http://127.0.0.1:8377/?token=abc", url: "http://127.0.0.1:8377/chats", token: "abc"},
		{in: "http://127.0.0.1:8377/#token=abc", url: "http://127.0.0.1:8377/chats", token: "abc"},
		{in: "http://127.0.0.1:8377/#chat=c1&token=abc", url: "http://127.0.0.1:8377/chats", token: "abc"},
		{in: "https://w.example.org/vm/", url: "https://w.example.org/vm/chats"},
		{in: "unix:relative.sock", bad: true},
		{in: "ftp://x", bad: true},
		{in: "127.0.0.1:8377", bad: true},
	} {
		r, err := ParseRemote(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error", c.in)
			}
			continue
		}
		if err != nil || r.Socket != c.socket || r.URL("/chats") != c.url || r.Token != c.token {
			t.Errorf("%q: %+v %v", c.in, r, err)
		}
	}
}
