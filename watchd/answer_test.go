package watchd

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

// POST /chats/C/answer: spool answer's rules, over HTTP.
func TestServeAnswer(t *testing.T) {
	s := newTestSpool(t)
	ts, _ := newTestServer(t, s)
	post := func(chat, body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/chats/"+chat+"/answer", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("c", `{"question":"q1","answer":"yes"}`); code != http.StatusConflict {
		t.Errorf("no run: %d", code)
	}
	p := &spool.Progress{Job: "j1", Chat: "c", Seq: 1, State: spool.Waiting,
		Question: &spool.Question{ID: "q1", Text: "Ship?", Options: []string{"yes", "no"}}}
	if err := s.WriteProgress(p); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		what, chat, body string
		hdr              []string
		want             int
	}{
		{"another origin", "c", `{"question":"q1","answer":"yes"}`, []string{"Origin", "http://evil.example"}, 403},
		{"another port of the host", "c", `{"question":"q1","answer":"yes"}`, []string{"Origin", "http://127.0.0.1:1"}, 403},
		{"cross-site fetch", "c", `{"question":"q1","answer":"yes"}`, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"a form's type", "c", `{"question":"q1","answer":"yes"}`, []string{"Content-Type", "text/plain"}, 415},
		{"a form", "c", `answer=yes`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"no answer", "c", `{"question":"q1"}`, nil, 400},
		{"not JSON", "c", `yes`, nil, 400},
		{"a bad chat id", "a%20b", `{"answer":"yes"}`, nil, 400},
		{"another question", "c", `{"question":"q9","answer":"yes"}`, nil, 409},
		{"not an option", "c", `{"question":"q1","answer":"perhaps"}`, nil, 400},
		{"empty", "c", `{"question":"q1","answer":""}`, nil, 400},
		{"a huge body", "c", `{"question":"q1","answer":"` + strings.Repeat("x", 100<<10) + `"}`, nil, 400},
	} {
		if code, body := post(c.chat, c.body, c.hdr...); code != c.want {
			t.Errorf("%s: %d %q; want %d", c.what, code, body, c.want)
		}
	}
	if _, err := s.ReadAnswer("c"); err == nil {
		t.Fatal("a refused request wrote an answer")
	}
	code, body := post("c", `{"question":"q1","answer":"Yes"}`, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin")
	if code != 200 || !strings.Contains(body, `"answer":"yes"`) {
		t.Fatalf("the page's answer: %d %q (host %s)", code, body, host)
	}
	if a, err := s.ReadAnswer("c"); err != nil || a.Answer != "yes" || a.Job != "j1" || a.Question != "q1" {
		t.Errorf("answer.json: %+v, %v", a, err)
	}
	if code, body := post("c", `{"question":"q1","answer":"no"}`); code != 409 || !strings.Contains(body, "already answered: yes") {
		t.Errorf("a second answer: %d %q", code, body)
	}
	// The run took the answer (its question closed): a late one is still
	// told what won, while the run lives and after it ended.
	for _, p := range []*spool.Progress{
		{Job: "j1", Chat: "c", Seq: 2, State: spool.Running},
		{Job: "j1", Chat: "c", Seq: 3, State: spool.Done, Done: true},
	} {
		if err := s.WriteProgress(p); err != nil {
			t.Fatal(err)
		}
		if code, body := post("c", `{"question":"q1","answer":"no"}`); code != 409 || !strings.Contains(body, "question q1: already answered: yes") {
			t.Errorf("a late answer, the run %s: %d %q", p.State, code, body)
		}
	}
}

func TestServeAnswerOff(t *testing.T) {
	s := newTestSpool(t)
	h, err := NewHub(s, HubConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := NewServer(ServerConfig{Spool: s, Hub: h, NoAnswer: true})
	r := httptest.NewRequest("POST", "/chats/c/answer", strings.NewReader(`{"answer":"yes"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != 403 || !strings.Contains(w.Body.String(), "--no-answer") {
		t.Errorf("--no-answer: %d %q", w.Code, w.Body)
	}
}

func TestBrowserSameOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, site string
		want         bool
	}{
		{"", "", true},
		{"http://127.0.0.1:8377", "same-origin", true},
		{"", "same-origin", false},
		{"http://evil.example", "", false},
		{"", "cross-site", false},
	} {
		r := httptest.NewRequest("POST", "http://127.0.0.1:8377/chats/c/answer", nil)
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			r.Header.Set("Sec-Fetch-Site", c.site)
		}
		if got := BrowserSameOrigin(r); got != c.want {
			t.Errorf("Origin %q, Sec-Fetch-Site %q: %v; want %v", c.origin, c.site, got, c.want)
		}
	}
}
