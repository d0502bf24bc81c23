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
	cookie := a.CookieName() + "=" + a.Token
	for _, c := range []struct {
		method, target string
		hdr            []string
		want           int
	}{
		{"GET", "/chats", nil, 401},
		{"GET", "/metrics", nil, 299},
		{"GET", "/chats", []string{"Authorization", "Bearer " + a.Token}, 299},
		{"GET", "/chats", []string{"Authorization", "Bearer " + a.Token + "x"}, 401},
		{"GET", "/chats", []string{"Cookie", cookie}, 299},
		{"GET", "/chats", []string{"Cookie", "watchd-000000000000=" + a.Token}, 401},
		{"GET", "/chats?token=" + a.Token, nil, 401},
		{"GET", "/?token=" + a.Token, nil, 303},
		{"GET", "/index.html?token=" + a.Token, nil, 303},
		{"GET", "/?token=nope", nil, 401},
		{"POST", "/?token=" + a.Token, nil, 401},
		{"POST", "/x", []string{"Cookie", cookie, "Origin", "http://example.com"}, 299},
		{"POST", "/x", []string{"Cookie", cookie, "Origin", "http://evil.example"}, 403},
		{"POST", "/x", []string{"Cookie", cookie}, 403},
		{"POST", "/x", []string{"Authorization", "Bearer " + a.Token}, 299},
	} {
		if w := do(c.method, c.target, c.hdr...); w.Code != c.want {
			t.Errorf("%s %s %q: %d %q; want %d", c.method, c.target, c.hdr, w.Code, w.Body, c.want)
		}
	}
	w := do("GET", "/?token="+a.Token)
	if sc := w.Header().Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") || w.Header().Get("Location") != "./" {
		t.Errorf("login: Set-Cookie %q, Location %q", sc, w.Header().Get("Location"))
	}
	if (&Auth{Token: a.Token + "x"}).CookieName() == a.CookieName() {
		t.Error("two tokens share a cookie name")
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
