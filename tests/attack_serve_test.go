package tests

// The attacks of the second review on what shows a run to people: the
// hints that tell a person which command answers a question, the Open
// WebUI tool's script, watchd serve's memory and who may read it. Each is
// reproduced against the real binaries as it was found, and is now
// refused, bounded or harmless (docs/reliability.md, "Attacks", "Second
// review").

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Second review, 2. A question id went unquoted into the "answer with
// this line" hints: a job that appended a question with the id
// `x $(touch P) #` made every hint a command that ran touch when pasted.
// A question id is now an id (the spool's rule): the crafted question is
// read as a status that asks nothing, `spool answer --question` refuses
// it, and nothing downstream ever sees the id.
func TestAttackQuestionIDHint(t *testing.T) {
	dir := newSpool(t)
	pasted := filepath.Join(t.TempDir(), "pasted")
	evil := "x $(touch " + pasted + ") #"
	line, _ := json.Marshal(map[string]any{"type": "question", "id": evil, "text": "Ship it?", "options": []string{"yes", "no"}})
	job := spooldSubmit(t, dir, "--chat", "evil", "--", "sh", "-c",
		`printf '%s\n' "$0" >> "$SPOOL_EVENTS"; spool say asked; sleep 60`, string(line))
	spooldStart(t, dir)
	doc := filepath.Join(dir, "progress", "evil")
	var raw []byte
	eventually(t, 30*time.Second, 20*time.Millisecond, "the run to say it asked", func() bool {
		raw, _ = os.ReadFile(doc)
		return strings.Contains(string(raw), `"status":"asked"`)
	})
	if strings.Contains(string(raw), evil) {
		t.Errorf("progress/evil carries the crafted question id: %s", raw)
	}

	// The id, given back to spool answer as a hint would, is refused as
	// any invalid id is, before anything is written.
	cmd := exec.Command(bin("spool"), "--spool", dir, "answer", "--chat", "evil", "--question", evil, "yes")
	cmd.Env = raceEnv()
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "invalid id") {
		t.Errorf("spool answer --question %q: exit %d: %s; want 2 and an invalid id", evil, code, out)
	}

	// What a watcher relays of the run: no question, no id.
	follow := exec.Command(bin("watchd"), "follow", "--spool", dir, "--chat", "evil", "--job", job, "--json", "--timeout", "2s")
	follow.Env = raceEnv()
	out, _ = follow.CombinedOutput()
	if strings.Contains(string(out), evil) || strings.Contains(string(out), `"kind":"question"`) {
		t.Errorf("watchd follow relays the crafted question: %s", out)
	}
	if _, err := os.Stat(pasted); err == nil {
		t.Fatal("the crafted question id ran a command")
	}
}

// attackOpenParents opens the directories from dir up to the system's
// temporary directory to other users (search only), so that what decides
// whether another user reaches a file under dir is the spool's own
// modes; it skips when something above is closed.
func attackOpenParents(t *testing.T, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Dir(dir); strings.HasPrefix(p, tmp+"/"); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(p, fi.Mode().Perm()|0o001)
		}
	}
	for p := tmp; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is closed to other users", p)
		}
		if p == "/" {
			break
		}
	}
}

// attackReader is what another local user runs against watchd serve: read
// the token file, ask the unix socket and the TCP port for a chat without
// a token. It prints one word each: "token:read" or "token:<errno>",
// "socket:<status>" or "socket:<errno>", "tcp:<status>", each followed by
// SECRET when the chat's words came back.
const attackReader = `import sys, socket, http.client
host, port, tokpath, sockpath = sys.argv[1:]
out = []
try:
    open(tokpath).read(); out.append("token:read")
except OSError as e:
    out.append("token:%d" % e.errno)
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sockpath)
    s.sendall(b"GET /chats/secret HTTP/1.0\r\nHost: localhost\r\n\r\n")
    r = b""
    while True:
        b = s.recv(65536)
        if not b: break
        r += b
    r = r.decode()
    out.append("socket:" + r.split(" ")[1] + (" SECRET" if "launch code" in r else ""))
except OSError as e:
    out.append("socket:%d" % e.errno)
c = http.client.HTTPConnection(host, int(port)); c.request("GET", "/chats/secret"); r = c.getresponse(); b = r.read().decode()
out.append("tcp:%d%s" % (r.status, " SECRET" if "launch code" in b else ""))
print(" ".join(out))
`

// Second review, 12. watchd serve had no authentication: the tree is
// group-only, yet any local user read every chat's questions and answers
// at 127.0.0.1:8377. Now its unix socket and its token file are as open as
// the tree (the spool's group) and no more, TCP asks for the token, and a
// browser's page takes the token from the printed address's fragment and
// sends it as a header: no cookie, which the browser would send to every
// port of the host (TestAttackCookieToOtherPort).
func TestAttackServeNoAuth(t *testing.T) {
	dir := newSpool(t)
	if err := os.MkdirAll(filepath.Join(dir, "progress"), 0o750); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	doc := fmt.Sprintf(`{"job":"J1","chat":"secret","seq":1,"updated":%d,"started":%d,"done":false,"state":"waiting","status":"asks","events":[{"seq":1,"type":"question","id":"q1","text":"the launch code?"}],"question":{"id":"q1","text":"the launch code?","options":[],"asked":%d}}`, now, now, now)
	if err := os.WriteFile(filepath.Join(dir, "progress", "secret"), []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		// The spool's group is nogroup, whose member nobody is: nobody may
		// read the spool, and so the HTTP surface; uid 12345 may not.
		attackOpenParents(t, dir)
		if err := os.Chown(dir, 0, attackNobody); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"progress", "progress/secret"} {
			os.Chown(filepath.Join(dir, p), 0, attackNobody)
		}
	}
	addrFile := filepath.Join(t.TempDir(), "addr")
	srv := relStart(t, "watchd", "serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--log-level", "warn")
	var addr string
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd serve to listen", func() bool {
		b, _ := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return addr != ""
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, path string, hdr ...string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
			}
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		// An event stream served lasts until the client's timeout: what
		// came until then is what was read.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), resp.Header
	}

	// Anyone on the machine, over TCP, without the token: nothing of a
	// chat (the page and its files answer: they hold no chat's words).
	for _, path := range []string{"/chats", "/chats/secret", "/chats/secret/events?job=J1"} {
		code, body, _ := get("GET", path)
		if code != http.StatusUnauthorized || strings.Contains(body, "launch code") {
			t.Errorf("GET %s without a token: %d %.200q; want 401", path, code, body)
		}
	}
	tokPath, sockPath := filepath.Join(dir, "watchd", "token"), filepath.Join(dir, "watchd", "serve.sock")
	tokB, err := os.ReadFile(tokPath)
	if err != nil {
		t.Fatalf("watchd serve made no token: %v", err)
	}
	tok := strings.TrimSpace(string(tokB))
	// The token is taken from an address only by the page (its fragment,
	// or the older ?token= sent on to it): elsewhere it stays out of logs
	// and histories.
	if code, _, _ := get("GET", "/chats/secret?token="+tok); code != http.StatusUnauthorized {
		t.Errorf("GET /chats/secret?token=: %d; want 401", code)
	}
	for _, h := range [][]string{{"Authorization", "Bearer " + strings.Repeat("0", len(tok))}, {"Authorization", "Basic " + tok}, {"Cookie", "watchd=" + tok}} {
		if code, _, _ := get("GET", "/chats/secret", h...); code != http.StatusUnauthorized {
			t.Errorf("GET /chats/secret with %s %.20s...: %d; want 401", h[0], h[1], code)
		}
	}
	if code, body, _ := get("GET", "/metrics"); code != 200 || strings.Contains(body, "launch code") || strings.Contains(body, "secret") {
		t.Errorf("GET /metrics: %d (a chat named in it: %v); want 200 and counts only", code, strings.Contains(body, "secret"))
	}

	// A program with the token.
	if code, body, _ := get("GET", "/chats/secret", "Authorization", "Bearer "+tok); code != 200 || !strings.Contains(body, "launch code") {
		t.Errorf("GET /chats/secret with the token: %d %.100q", code, body)
	}

	// A browser: the printed address carries the token in its fragment,
	// which no server sees; the older ?token= is sent on to it. No cookie.
	if !strings.Contains(srv.logText(), "http://"+addr+"/#token="+tok) {
		t.Errorf("watchd serve did not print the page's address with its token: %s", srv.logText())
	}
	code, _, h := get("GET", "/?token="+tok)
	if code != http.StatusSeeOther || h.Get("Location") != "./#token="+tok || h.Get("Set-Cookie") != "" {
		t.Errorf("GET /?token=: %d to %q, cookie %q; want 303 to ./#token=T and no cookie", code, h.Get("Location"), h.Get("Set-Cookie"))
	}
	if code, body, h := get("GET", "/"); code != 200 || !strings.Contains(body, "<html") || h.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /: %d, CSP %q", code, h.Get("Content-Security-Policy"))
	}
	if code, _, _ := get("GET", "/?token=wrong-token-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("GET /?token=<wrong>: %d; want 401", code)
	}
	// A request that changes something needs the token, whatever its
	// origin says (no route takes a POST of /chats/C: 405 is past the guard).
	origin := "http://" + addr
	for _, c := range []struct {
		hdr  []string
		want int
	}{
		{[]string{"Authorization", "Bearer " + tok, "Origin", origin, "Sec-Fetch-Site", "same-origin"}, http.StatusMethodNotAllowed},
		{[]string{"Cookie", "watchd=" + tok, "Origin", origin, "Sec-Fetch-Site", "same-origin"}, http.StatusUnauthorized},
		{[]string{"Origin", origin}, http.StatusUnauthorized},
	} {
		if code, body, _ := get("POST", "/chats/secret", c.hdr...); code != c.want {
			t.Errorf("POST with %.40q: %d %.100q; want %d", c.hdr, code, body, c.want)
		}
	}
	// The Host guard holds with the token as without (DNS rebinding).
	if code, _, _ := get("GET", "/chats/secret", "Authorization", "Bearer "+tok, "Host", "rebind.attacker.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host with the token: %d; want 421", code)
	}

	// The files are as open as the tree, no more.
	for p, want := range map[string]os.FileMode{filepath.Dir(tokPath): 0o750, tokPath: 0o640, sockPath: 0o660} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v; want %v", p, fi.Mode().Perm(), want)
		}
		if root && fi.Sys().(*syscall.Stat_t).Gid != attackNobody {
			t.Errorf("%s: group %d; want the spool's (%d)", p, fi.Sys().(*syscall.Stat_t).Gid, attackNobody)
		}
	}

	if !root {
		t.Log("not root: the other users' part needs root to be them")
		return
	}
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3 to play the other users")
	}
	host, port, _ := strings.Cut(addr, ":")
	for _, c := range []struct {
		who      string
		uid, gid uint32
		want     string
	}{
		// nobody, in the spool's group: reads the spool, and so the token
		// and the socket; TCP still asks for the token.
		{"a member of the spool's group", attackNobody, attackNobody, "token:read socket:200 SECRET tcp:401"},
		// Anyone else: nothing at all.
		{"another local user", 12345, 12345, "token:13 socket:13 tcp:401"},
	} {
		cmd := exec.Command(py, "-c", attackReader, host, port, tokPath, sockPath)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid}}
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != c.want {
			t.Errorf("%s: %q (%v); want %q", c.who, got, err, c.want)
		}
	}
}

// The page's answer (POST /chats/C/answer) against the real watchd serve,
// as a forged request would come: without the token (a page of another
// origin can send no Authorization header without a CORS preflight,
// which watchd never answers), with a cookie of the token (no cookie is a
// credential), with the token but a form's type, with the token from a
// browser on another origin. Each is refused and nothing is written; the
// page's own request answers.
func TestAttackServeAnswerForged(t *testing.T) {
	dir := newSpool(t)
	if err := os.MkdirAll(filepath.Join(dir, "progress"), 0o750); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	doc := fmt.Sprintf(`{"job":"J1","chat":"c","seq":1,"updated":%d,"started":%d,"done":false,"state":"waiting","status":"asks","events":[],"question":{"id":"q1","text":"Wipe?","options":["yes","no"],"asked":%d}}`, now, now, now)
	if err := os.WriteFile(filepath.Join(dir, "progress", "c"), []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	base := opsServeWatchd(t, dir)
	host := strings.TrimPrefix(base, "http://")
	tok := serveToken(host)
	cookie := "watchd-0123456789ab=" + tok
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(body string, hdr ...string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/chats/c/answer", strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"question":"q1","answer":"yes"}`
	for _, c := range []struct {
		what string
		hdr  []string
		want int
	}{
		{"no token, another origin", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, 401},
		{"no token, a form", []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 401},
		{"a cookie, another origin", []string{"Content-Type", "application/json", "Cookie", cookie, "Origin", "http://evil.example"}, 401},
		{"a cookie, another port", []string{"Content-Type", "text/plain", "Cookie", cookie, "Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}, 401},
		{"a cookie, its own origin", []string{"Content-Type", "application/json", "Cookie", cookie, "Origin", base, "Sec-Fetch-Site", "same-origin"}, 401},
		{"the token, a form's type", []string{"Content-Type", "application/x-www-form-urlencoded", "Authorization", "Bearer " + tok}, 415},
		{"the token, another origin", []string{"Content-Type", "application/json", "Authorization", "Bearer " + tok, "Origin", "http://evil.example"}, 403},
	} {
		if got := post(body, c.hdr...); got != c.want {
			t.Errorf("%s: %d; want %d", c.what, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "chats", "c", "answer.json")); err == nil {
		t.Fatal("a forged request wrote an answer")
	}
	if got := post(body, "Content-Type", "application/json", "Authorization", "Bearer "+tok, "Origin", base, "Sec-Fetch-Site", "same-origin"); got != 200 {
		t.Errorf("the page's own answer: %d", got)
	}
	if got := post(`{"question":"q1","answer":"no"}`, "Content-Type", "application/json", "Authorization", "Bearer "+tok); got != 409 {
		t.Errorf("a second answer: %d; want 409 (the first wins)", got)
	}
}

// Third round, 4: connections without the token were unbounded. A 401
// kept its connection open (3,000 of 3,000 were still open after 80 s),
// and with 1,024 descriptors the token's holder got no answer for more
// than a minute. Now a 401 closes its connection, and each listener
// keeps at most --max-conns open, closing any more at once. Here watchd
// may open 256 files and keeps 100 connections: 300 clients without the
// token are each answered and cut off, then 300 that send nothing are
// held or closed at once, and the token's holder is answered all along
// (at once, or once the idle ones' 5 s for a header ran out).
func TestAttackServeConnFlood(t *testing.T) {
	dir := newSpool(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	srv := relStart(t, "watchd", "serve", "--spool", dir, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--max-conns", "100")
	var addr string
	eventually(t, 20*time.Second, 20*time.Millisecond, "watchd serve to listen", func() bool {
		b, _ := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return addr != ""
	})
	if err := unix.Prlimit(srv.cmd.Process.Pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: 256}, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	tokB, err := os.ReadFile(filepath.Join(dir, "watchd", "token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(tokB))
	holder := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	answered := func() bool {
		req, _ := http.NewRequest("GET", "http://"+addr+"/chats", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := holder.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}

	// 300 clients without the token, each keeping its connection.
	var wg sync.WaitGroup
	var kept atomic.Int32
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /chats HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			// Whatever came (a 401, or nothing over the cap), the server
			// must close the connection: the read ends (EOF, or a reset
			// where the request was left unread), not in the deadline.
			c.SetReadDeadline(time.Now().Add(4 * time.Second))
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				kept.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := kept.Load(); n > 0 {
		t.Errorf("%d of 300 connections without the token were kept open after their 401", n)
	}
	if !answered() {
		t.Error("the token's holder got no answer after the flood")
	}

	// 300 that send nothing, held open by the client.
	var idle []net.Conn
	for range 300 {
		if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			idle = append(idle, c)
		}
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	eventually(t, 15*time.Second, 100*time.Millisecond, "the token's holder to be answered beside 300 idle connections", answered)
	if !srv.alive() || strings.Contains(srv.logText(), "too many open files") {
		t.Fatalf("watchd ran out of descriptors: %s", srv.logText())
	}
	if !strings.Contains(srv.logText(), "connections over the cap closed at once") {
		t.Errorf("watchd did not say it closed connections over its cap: %s", srv.logText())
	}
}
