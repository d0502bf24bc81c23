package watchd

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

type sseEvent struct {
	id, event string
	msg       Message
}

// readSSE reads events from an SSE body until the stream ends or n events
// were read, and sends them on a channel.
func readSSE(t *testing.T, resp *http.Response) <-chan sseEvent {
	ch := make(chan sseEvent, 256)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &ev.msg)
			}
		}
	}()
	return ch
}

func newTestServer(t *testing.T, s *spool.Spool) (*httptest.Server, context.CancelFunc) {
	t.Helper()
	h, err := NewHub(s, HubConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	srv := NewServer(ServerConfig{Spool: s, Hub: h, MaxSubscribers: 3})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.BaseContext = srv.HTTPServer("", ctx).BaseContext
	ts.Start()
	t.Cleanup(func() { cancel(); ts.Close(); h.Close() })
	return ts, cancel
}

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestServeDocumentAndErrors(t *testing.T) {
	s := newTestSpool(t)
	ts, _ := newTestServer(t, s)
	for _, tt := range []struct {
		path string
		code int
	}{
		{"/chats/c", 404},
		{"/chats/..%2Fx", 400},
		{"/chats/.hidden", 400},
		{"/chats/c/events?job=../x", 400},
		{"/chats/c/events?last=nope", 400},
		{"/chats/c/events?last=4.end", 204},
		{"/", 200},
		{"/app.js", 200},
		{"/style.css", 200},
		{"/web.go", 404},
		{"/nope", 404},
		{"/chats", 200},
	} {
		resp := get(t, ts.URL+tt.path)
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("GET %s: %d, want %d", tt.path, resp.StatusCode, tt.code)
		}
	}
	newRun(t, s, "c", "j").say("hello")
	resp := get(t, ts.URL+"/chats/c")
	var p spool.Progress
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 200 || p.Job != "j" || p.Status != "hello" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /chats/c: %d %+v", resp.StatusCode, p)
	}
}

func TestServeSubscribersSeeTheirChat(t *testing.T) {
	s := newTestSpool(t)
	ts, _ := newTestServer(t, s)
	a1 := readSSE(t, get(t, ts.URL+"/chats/a/events"))
	a2 := readSSE(t, get(t, ts.URL+"/chats/a/events?job=ja"))
	b := readSSE(t, get(t, ts.URL+"/chats/b/events"))
	// A fourth is one too many.
	if resp := get(t, ts.URL+"/chats/b/events"); resp.StatusCode != 503 {
		t.Errorf("fourth subscriber: %d, want 503", resp.StatusCode)
	}
	// The three answered 200 and the fourth 503: the three are
	// subscribed, and the runs may start.
	ra, rb := newRun(t, s, "a", "ja"), newRun(t, s, "b", "jb")
	for i := 0; i < 5; i++ {
		ra.say("a" + string(rune('0'+i)))
		rb.say("b" + string(rune('0'+i)))
	}
	ra.end(spool.Done, 0)
	rb.end(spool.Failed, 1)
	collect := func(ch <-chan sseEvent) string {
		var b []string
		for ev := range ch {
			b = append(b, ev.id+"/"+ev.event+"/"+ev.msg.Text)
		}
		return strings.Join(b, " ")
	}
	wantA := "1/status/a0 2/status/a1 3/status/a2 4/status/a3 5/status/a4 5.end/end/done"
	if got := collect(a1); got != wantA {
		t.Errorf("a1 got %s", got)
	}
	if got := collect(a2); got != wantA {
		t.Errorf("a2 got %s", got)
	}
	if got := collect(b); got != "1/status/b0 2/status/b1 3/status/b2 4/status/b3 5/status/b4 5.end/end/failed (exit 1)" {
		t.Errorf("b got %s", got)
	}
}

func TestServeResume(t *testing.T) {
	s := newTestSpool(t)
	ts, _ := newTestServer(t, s)
	r := newRun(t, s, "c", "j")
	r.say("1", "2", "3")
	time.Sleep(20 * time.Millisecond) // the point: stamped before the reconnection (past the 10 ms rounding), so only ?job lets it through
	resp := get(t, ts.URL+"/chats/c/events?job=j", "Last-Event-ID", "2")
	ch := readSSE(t, resp)
	if ev := <-ch; ev.id != "3" || ev.msg.Text != "3" {
		t.Fatalf("first after resume: %+v", ev)
	}
	r.say("4").end(spool.Done, 0)
	var ids []string
	for ev := range ch {
		ids = append(ids, ev.id)
	}
	if strings.Join(ids, " ") != "4 4.end" {
		t.Errorf("ids %v", ids)
	}
}

func TestServeShutdownEndsStreams(t *testing.T) {
	s := newTestSpool(t)
	ts, cancel := newTestServer(t, s)
	// get returned the stream's 200: it is open, and shutdown must end it.
	ch := readSSE(t, get(t, ts.URL+"/chats/c/events"))
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("an event on shutdown")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after shutdown")
	}
}
