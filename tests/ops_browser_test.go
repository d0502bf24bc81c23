package tests

// The live page in a real browser: Debian's chromium, headless, driven over
// the DevTools protocol (chromedp), loads watchd serve's page, a run is
// submitted with `spool submit`, and the page shows its statuses as they
// come and then its end. A screenshot is kept for a person to look at.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/vmspool/vmspool/spool"
)

// opsChromium returns the browser to drive, or skips the test: a developer
// box without chromium still passes `go test`; CI installs it (.ci/run).
func opsChromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("no chromium (apt-get install chromium, or set CHROMIUM): the live page's browser test needs one")
	return ""
}

// opsArtifact is where a test keeps a file for a person to look at after
// the run: $TEST_ARTIFACTS, else a directory under the system's temp dir
// that outlives the test (and is never in the checkout).
func opsArtifact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "vmspool-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// opsRow is what the page shows of one chat.
type opsRow struct {
	State  string   `json:"state"`
	Live   string   `json:"live"`
	Status string   `json:"status"`
	Job    string   `json:"job"`
	Lines  []string `json:"lines"`
	Ask    string   `json:"ask"`
}

const opsRowJS = `(() => {
  const tr = document.querySelector('tr[data-chat=%q]');
  if (!tr) return null;
  return {
    state: tr.dataset.state || "",
    live: tr.dataset.live || "",
    status: tr.querySelector('.status').textContent,
    job: tr.querySelector('td.job').textContent,
    lines: [...tr.querySelectorAll('ol.lines li')].map(li => li.textContent),
    ask: tr.querySelector('.ask').hidden ? "" : tr.querySelector('.ask').textContent,
  };
})()`

func TestOpsLivePage(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	opsStart(t, nil, "spoold", "--spool", dir)
	base, page := opsServeWatchdPage(t, dir)
	// An earlier run in another chat, ended before the page loads: the page
	// lists it with its final state.
	s := openSpool(t, dir, 200)
	first := opsSubmit(t, dir, "earlier", "sh", "-c", "spool say 'all set'; exit 0")
	opsWaitEnded(t, s, first, 30*time.Second)

	ctx := opsBrowser(t, chromium)

	row := func(chat string) *opsRow {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[*opsRow](sprintfJS(opsRowJS, chat)))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return r
	}
	waitRow := func(chat, what string, cond func(*opsRow) bool) *opsRow {
		t.Helper()
		var r *opsRow
		eventually(t, 30*time.Second, 20*time.Millisecond, what, func() bool {
			r = row(chat)
			return r != nil && cond(r)
		})
		return r
	}

	// The page's address as watchd serve printed it: its token becomes an
	// HttpOnly cookie, and the browser is sent on to the page without it.
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", page, err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + document.cookie`))
	if err != nil || loc != base+"/ " {
		t.Errorf("after the printed address the page is at %q (and sees its cookies); want %s/ and none seen (HttpOnly): %v", loc, base, err)
	}
	r := waitRow("earlier", "the ended run to be listed", func(r *opsRow) bool { return r.State == "done" })
	if r.Job != first || r.Status == "" {
		t.Errorf("ended run shows %+v; want job %s and its last status", r, first)
	}

	// A run submitted while the page is open: its statuses arrive one by
	// one, it asks a question and waits, then it ends. Its first wait is
	// longer than the page's refresh of the list (3 s), so that the page
	// finds it running and follows it.
	job := opsSubmit(t, dir, "live", "sh", "-c", `spool say 'step one'; sleep 1
ans=$(spool ask --options yes,no --timeout 60s 'Deploy now?') || exit 9
spool say "step two: $ans"; sleep 1; exit 0`)
	r = waitRow("live", "the new run to be followed live", func(r *opsRow) bool {
		return r.Job == job && r.Live == "yes"
	})
	r = waitRow("live", "the run's question", func(r *opsRow) bool {
		return r.State == "waiting" && strings.Contains(r.Ask, "Deploy now?")
	})
	if !strings.Contains(r.Ask, "yes / no") || !strings.Contains(r.Ask, "spool answer --chat live --question ") {
		t.Errorf("the question shows %q; want its options and the command that answers it", r.Ask)
	}
	if !strings.Contains(r.Status, "step one") {
		t.Errorf("while waiting the latest status is %q; want step one", r.Status)
	}
	opsScreenshot(t, ctx, "live-page-question.png")
	if out, err := exec.Command(bin("spool"), "--spool", dir, "answer", "--chat", "live", "yes").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, out)
	}
	r = waitRow("live", "the answer to reach the page", func(r *opsRow) bool {
		return r.Ask == "" && strings.Contains(r.Status, "step two: yes")
	})
	if r.State != "running" {
		t.Errorf("after the answer the run shows %q; want running", r.State)
	}
	r = waitRow("live", "the run's end", func(r *opsRow) bool { return r.State == "done" })
	for _, want := range []string{"step one", "Deploy now?", "answered: yes", "step two: yes"} {
		found := false
		for _, l := range r.Lines {
			found = found || strings.Contains(l, want)
		}
		if !found {
			t.Errorf("the page's lines for the run lack %q: %q", want, r.Lines)
		}
	}
	if last := r.Lines[len(r.Lines)-1]; !strings.Contains(last, "done") {
		t.Errorf("the run's last line is %q; want its end (done)", last)
	}
	if r.Live != "no" {
		t.Errorf("the ended run's stream is still open (data-live=%q)", r.Live)
	}
	opsScreenshot(t, ctx, "live-page.png")
}

// opsBrowser starts a headless chromium for the test and returns its
// context, ended with the test (and after 90 s at most).
func opsBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 700),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// One chat's crafted document ("updated": 1e300, a stamp no Date can
// hold) must not blank the page: before, toISOString threw in the
// list's update and every chat after it vanished.
func TestOpsLivePageBadStamp(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	if err := os.MkdirAll(filepath.Join(dir, "progress"), 0o750); err != nil {
		t.Fatal(err)
	}
	now := float64(time.Now().Unix())
	docs := map[string]string{
		"aaa-bad":  `{"job":"J1","chat":"aaa-bad","updated":1e300,"started":1e300,"done":false,"state":"running","status":"crafted","events":[]}`,
		"bbb-good": fmt.Sprintf(`{"job":"J2","chat":"bbb-good","updated":%v,"started":%v,"done":true,"state":"done","status":"all fine","events":[]}`, now, now),
	}
	for chat, doc := range docs {
		if err := os.WriteFile(filepath.Join(dir, "progress", chat), []byte(doc), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	base := opsServeWatchd(t, dir)
	ctx := opsBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?token="+serveToken(strings.TrimPrefix(base, "http://"))), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", base, err)
	}
	var good *opsRow
	eventually(t, 30*time.Second, 50*time.Millisecond, "the good chat's row beside the crafted one", func() bool {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[*opsRow](sprintfJS(opsRowJS, "bbb-good")))
		good = r
		return err == nil && r != nil && r.Status == "all fine"
	})
	if good.State != "done" {
		t.Errorf("the good chat shows %+v", good)
	}
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[*opsRow](sprintfJS(opsRowJS, "aaa-bad")))
	if err != nil || bad == nil || bad.Status != "crafted" {
		t.Errorf("the crafted chat's row: %+v, %v (want it listed, its bad stamp ignored)", bad, err)
	}
	opsScreenshot(t, ctx, "live-page-bad-stamp.png")
}

// opsScreenshot keeps a picture of the page as a test artifact.
func opsScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := opsArtifact(t, name)
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the live page: %s", shot)
}

// sprintfJS puts a Go-quoted string into a script: %q quotes are valid
// JavaScript string literals for the ids the spool allows.
func sprintfJS(format, s string) string { return strings.Replace(format, "%q", `"`+s+`"`, 1) }

// Second review, 2: the page's "answer with this line" hint printed a
// question's id as it was, so a document whose question id was
// `x $(touch P) #` showed a line that ran touch when pasted. The id is
// dropped when the document is read (it is not an id), and the page
// quotes every word it puts in a command line besides.
func TestOpsLivePageQuestionHint(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	if err := os.MkdirAll(filepath.Join(dir, "progress"), 0o750); err != nil {
		t.Fatal(err)
	}
	pasted := filepath.Join(t.TempDir(), "pasted")
	evil := "x $(touch " + pasted + ") #"
	now := float64(time.Now().Unix())
	q, _ := json.Marshal(map[string]any{"id": evil, "text": "Ship it?", "options": []string{"yes", "no"}, "asked": now})
	doc := fmt.Sprintf(`{"job":"J1","chat":"crafted","seq":1,"updated":%v,"started":%v,"done":false,"state":"waiting","status":"asks","events":[],"question":%s}`, now, now, q)
	if err := os.WriteFile(filepath.Join(dir, "progress", "crafted"), []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	base := opsServeWatchd(t, dir)
	ctx := opsBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?token="+serveToken(strings.TrimPrefix(base, "http://"))), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", base, err)
	}
	var how string
	eventually(t, 30*time.Second, 50*time.Millisecond, "the crafted question's hint", func() bool {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const c = document.querySelector('tr[data-chat="crafted"] .ask code.how'); return c ? c.textContent : ""; })()`))
		how = s
		return err == nil && s != ""
	})
	opsScreenshot(t, ctx, "live-page-question-hint.png")
	// The hint pasted into a shell, as an operator would (as root, often).
	paste := func(line string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(raceEnv(), "SPOOL_DIR="+dir)
		out, _ := cmd.CombinedOutput()
		if _, err := os.Stat(pasted); err == nil {
			t.Fatalf("pasting %q ran a command (output %q)", line, out)
		}
	}
	if strings.Contains(how, "touch") {
		t.Errorf("the page's hint carries the crafted id: %q", how)
	}
	paste(strings.Replace(how, "TEXT", "yes", 1))
	// And the page's quoting alone: a word with every character a shell
	// reads specially is given back as that very word.
	word := `it's $(touch ` + pasted + `) "x" ` + "`touch " + pasted + "`; #\\ *"
	quoted, err := chromedp.Run(ctx, chromedp.Evaluate[string]("shq("+strconv.Quote(word)+")"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "printf '%s' "+quoted).Output()
	if err != nil || string(out) != word {
		t.Errorf("shq(%q) = %s, which a shell reads as %q (%v)", word, quoted, out, err)
	}
	paste("printf '%s' " + quoted)
}

// The page answers a run's question (issue: the person and the run never
// lose each other). Opened at the chat's own address (#chat=C, which the
// Open WebUI tool points its person to when the dialog is gone), it shows
// that chat alone, its question with a button per option, and a click
// answers it by the rules of `spool answer`: the job goes on with that
// answer. A question without options takes typed text, an empty one
// only where the question allows it.
func TestOpsLivePageAnswers(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	opsStart(t, nil, "spoold", "--spool", dir)
	base, page := opsServeWatchdPage(t, dir)
	s := openSpool(t, dir, 200)
	other := opsSubmit(t, dir, "other", "sh", "-c", "spool say 'elsewhere'")
	opsWaitEnded(t, s, other, 30*time.Second)
	job := opsSubmit(t, dir, "asker", "sh", "-c", `a=$(spool ask --options yes,no --timeout 60s 'Deploy now?') || exit 9
spool say "deploy: $a"
b=$(spool ask --timeout 60s 'Which branch?') || exit 8
spool say "branch: $b"`)
	ctx := opsBrowser(t, chromium)
	// The printed address with the chat's fragment pasted after it: the
	// page takes the token out of the address and keeps the chat.
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#chat=asker"), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", page, err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err != nil || loc != base+"/#chat=asker" {
		t.Errorf("the chat's address after the login is %q (%v); want %s/#chat=asker", loc, err, base)
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	const buttons = `(() => { const tr = document.querySelector('tr[data-chat="asker"]'); if (!tr || tr.hidden) return ""; return [...tr.querySelectorAll('.ask button.option')].map(b => b.textContent).join(","); })()`
	eventually(t, 30*time.Second, 20*time.Millisecond, "the question's buttons", func() bool { return eval(buttons) == "yes,no" })
	if got := eval(`(() => { const tr = document.querySelector('tr[data-chat="other"]'); return tr ? String(tr.hidden) : "absent"; })()`); got != "true" {
		t.Errorf("another chat's row beside the focused one: hidden %s; want true", got)
	}
	opsScreenshot(t, ctx, "live-page-answer.png")
	eval(`(() => { [...document.querySelectorAll('tr[data-chat="asker"] .ask button.option')].find(b => b.textContent === "no").click(); return ""; })()`)
	eventually(t, 30*time.Second, 20*time.Millisecond, "the run to take the page's answer", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, job+".events"))
		return strings.Contains(string(b), "deploy: no")
	})
	// The second question: typed text; an empty one is refused on the
	// page, before anything is sent.
	const input = `tr[data-chat="asker"] .ask input.reply`
	eventually(t, 30*time.Second, 20*time.Millisecond, "the text question", func() bool {
		return eval(`(() => { const i = document.querySelector('`+input+`'); return i ? "yes" : ""; })()`) == "yes"
	})
	said := `(() => { const s = document.querySelector('tr[data-chat="asker"] .ask .said'); return s ? s.textContent : ""; })()`
	eval(`(() => { document.querySelector('tr[data-chat="asker"] .ask button.send').click(); return ""; })()`)
	if got := eval(said); !strings.Contains(got, "needs an answer") {
		t.Errorf("an empty answer to a question that needs one: the page says %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(input, "main\r")); err != nil {
		t.Fatal(err)
	}
	r := opsWaitEnded(t, s, job, 30*time.Second)
	if r.State != spool.Done {
		t.Fatalf("the run ended %+v", r)
	}
	b, _ := os.ReadFile(filepath.Join(dir, job+".events"))
	if !strings.Contains(string(b), "branch: main") {
		t.Errorf("the typed answer did not reach the run: %s", b)
	}
}

// The answer is the page's one write: another page the person visits
// (here another port of 127.0.0.1, the same site, so SameSite=Strict lets
// the browser send the cookie) tries to answer the chat's question with
// every request a page can make without watchd's consent: a form, and a
// fetch of a "simple" type with the cookie. Each is refused (the Origin
// is not watchd's, a form's type is not JSON); the question stays open and
// no answer is written.
func TestAttackPageAnswerCrossOrigin(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	opsStart(t, nil, "spoold", "--spool", dir)
	base, page := opsServeWatchdPage(t, dir)
	s := openSpool(t, dir, 200)
	job := opsSubmit(t, dir, "victim", "sh", "-c", `a=$(spool ask --options yes,no --timeout 60s 'Delete the data?') || exit 9; spool say "got $a"`)
	eventually(t, 30*time.Second, 20*time.Millisecond, "the question", func() bool {
		p, err := s.ReadProgress("victim")
		return err == nil && p.Job == job && p.Question != nil
	})
	hits := make(chan string, 8)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		target := base + "/chats/victim/answer"
		fmt.Fprintf(w, `<!doctype html><body><iframe name="sink"></iframe>
<form id="f" method="POST" action="%s" enctype="text/plain" target="sink"><input name='{"answer":"yes","x":"' value='"}'></form>
<script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: '{"answer":"yes"}'})
  .then(() => { document.title = "fetched"; }, () => { document.title = "fetched"; });
document.getElementById("f").submit();
</script></body>`, target, target)
		hits <- r.URL.Path
	}))
	t.Cleanup(evil.Close)
	ctx := opsBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", page, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL)); err != nil {
		t.Fatalf("loading the other page: %v", err)
	}
	<-hits
	eventually(t, 20*time.Second, 20*time.Millisecond, "the other page's requests to be made", func() bool {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
		return v == "fetched"
	})
	// Both requests went out (the fetch resolved; the form navigated its
	// frame): what they did is read from the tree. A short wait for a
	// write that must not come (the form's frame may still be loading).
	time.Sleep(500 * time.Millisecond)
	if a, err := s.ReadAnswer("victim"); err == nil {
		t.Fatalf("a page of another origin answered the question: %+v", a)
	}
	if p, err := s.ReadProgress("victim"); err != nil || p.Question == nil {
		t.Fatalf("the question is no longer open: %+v, %v", p, err)
	}
	// And the page itself may: the same browser, the same cookie.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#chat=victim"), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 20*time.Millisecond, "the page's buttons", func() bool {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const b = [...document.querySelectorAll('tr[data-chat="victim"] .ask button.option')].find(b => b.textContent === "no"); if (!b) return ""; b.click(); return "clicked"; })()`))
		return v == "clicked"
	})
	if r := opsWaitEnded(t, s, job, 30*time.Second); r.State != spool.Done {
		t.Errorf("the run ended %+v", r)
	}
	if a, err := s.ReadAnswer("victim"); err == nil && a.Answer != "no" {
		t.Errorf("the answer taken is %+v; want the page's no", a)
	}
}

// Third round, 1: the page's credential must reach no other server of the
// host. A browser keeps cookies per host, not per port: when the page's
// address left the token in a cookie, any page on another port of
// 127.0.0.1 that showed an image from a third port (a model's image link
// in Open WebUI on the same machine is enough) made the browser send the
// token to that third port's server, run by anyone. As it was found: the
// operator opens the printed address, then such a page; the third server
// logs every request it gets, and none may carry the token, in any header
// or in its address.
func TestAttackCookieToOtherPort(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	base, page := opsServeWatchdPage(t, dir)
	tok := serveToken(strings.TrimPrefix(base, "http://"))
	if tok == "" {
		t.Fatal("watchd serve's token is not known")
	}
	type seen struct{ path, headers string }
	hits := make(chan seen, 16)
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h strings.Builder
		r.Header.Write(&h)
		hits <- seen{r.URL.String(), h.String()}
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	}))
	t.Cleanup(third.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body><img src="%s/pixel.gif" onload="document.title='loaded'" onerror="document.title='loaded'"></body>`, third.URL)
	}))
	t.Cleanup(other.Close)

	ctx := opsBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", page, err)
	}
	eventually(t, 20*time.Second, 20*time.Millisecond, "the page to be signed in", func() bool {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("conn").dataset.conn || ""`))
		return v == "up"
	})
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + document.cookie`)); err != nil || strings.Contains(v, tok) {
		t.Errorf("the page keeps the token in its address or a cookie: %q %v", v, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL)); err != nil {
		t.Fatalf("loading the other page: %v", err)
	}
	eventually(t, 20*time.Second, 20*time.Millisecond, "the other page's image", func() bool {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
		return v == "loaded"
	})
	third.Close() // every request it got is in hits
	close(hits)
	n := 0
	for h := range hits {
		n++
		if strings.Contains(h.path+h.headers, tok) {
			t.Errorf("the third port's server got the token: GET %s\n%s", h.path, h.headers)
		}
	}
	if n == 0 {
		t.Fatal("the third port's server got no request: the test proves nothing")
	}
	// The page, opened again in this tab without the token in its address
	// (the link a chat's tool shows), is still signed in; and an address
	// with a token of another's choosing (any page may open one) does not
	// replace the one watchd takes.
	for _, addr := range []string{base + "/#chat=none", base + "/#token=chosen-by-another-page&chat=none"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(addr), chromedp.WaitVisible("#conn")); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, 20*time.Millisecond, "the page at "+addr+" to be signed in", func() bool {
			v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("conn").dataset.conn || ""`))
			return v == "up"
		})
	}
}

// Issue 32, 4: the page shows the outcome of its own answer, whatever
// order the run's answer event and the request's reply come in. The run's
// answer event removes the question's box 10 to 50 ms after an answer is
// written, often before the page's request returns: the outcome is kept
// outside it. A winner reads "taken"; a loser, whose click came in the
// instant before another answer closed the question, reads "already
// answered" and with what.
func TestOpsLivePageAnswerOutcome(t *testing.T) {
	chromium := opsChromium(t)
	dir := newSpool(t)
	opsStart(t, nil, "spoold", "--spool", dir)
	_, page := opsServeWatchdPage(t, dir)
	ctx := opsBrowser(t, chromium)
	job := opsSubmit(t, dir, "oc", "sh", "-c", `sleep 4
a=$(spool ask --options yes,no --timeout 60s 'First?') || exit 9
b=$(spool ask --options yes,no --timeout 60s 'Second?') || exit 9
spool say "got $a $b"; sleep 1`)
	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#chat=oc"), chromedp.WaitVisible("#conn")); err != nil {
		t.Fatalf("loading %s: %v", page, err)
	}
	type outcome struct {
		Ask     string `json:"ask"`
		Result  string `json:"result"`
		Text    string `json:"text"`
		Visible bool   `json:"visible"`
	}
	const outcomeJS = `(() => {
  const tr = document.querySelector('tr[data-chat="oc"]');
  if (!tr) return null;
  const o = tr.querySelector('.outcome');
  const ask = tr.querySelector('.ask');
  return { ask: ask.hidden ? "" : ask.textContent, result: o.dataset.result || "", text: o.textContent, visible: !o.hidden };
})()`
	read := func() *outcome {
		o, err := chromedp.Run(ctx, chromedp.Evaluate[*outcome](outcomeJS))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return o
	}
	wait := func(what string, cond func(*outcome) bool) *outcome {
		t.Helper()
		var o *outcome
		eventually(t, 30*time.Second, 20*time.Millisecond, what, func() bool {
			o = read()
			return o != nil && cond(o)
		})
		return o
	}
	click := `(() => { const b = [...document.querySelectorAll('tr[data-chat="oc"] .ask button.option')].find(b => b.textContent === %q); if (!b) return false; b.click(); return true; })()`

	// The winner: the page's click. The question's box goes, the outcome stays.
	wait("the first question", func(o *outcome) bool { return strings.Contains(o.Ask, "First?") })
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](sprintfJS(click, "yes"))); err != nil || !ok {
		t.Fatalf("clicking yes: %v, %v", ok, err)
	}
	o := wait("the page's answer to be taken", func(o *outcome) bool { return o.Result == "ok" && !strings.Contains(o.Ask, "First?") })
	if !o.Visible || !strings.Contains(o.Text, "your answer was taken: yes") {
		t.Errorf("the winner's outcome: %+v", o)
	}

	// The loser: the person's click lands as the shell's answer wins. The
	// button is held, the shell answers, and once the run's answer event
	// took the box away the held button is clicked.
	wait("the second question", func(o *outcome) bool { return strings.Contains(o.Ask, "Second?") })
	if o := read(); o.Visible {
		t.Errorf("the first question's outcome still shows with the second question: %+v", o)
	}
	hold := `(() => { window.held = [...document.querySelectorAll('tr[data-chat="oc"] .ask button.option')].find(b => b.textContent === "yes"); return !!window.held; })()`
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](hold)); err != nil || !ok {
		t.Fatalf("holding the button: %v, %v", ok, err)
	}
	if out, err := exec.Command(bin("spool"), "--spool", dir, "answer", "--chat", "oc", "no").CombinedOutput(); err != nil {
		t.Fatalf("spool answer: %v: %s", err, out)
	}
	wait("the shell's answer to close the question", func(o *outcome) bool { return o.Ask == "" })
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.held.click(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	o = wait("the page to say its answer lost", func(o *outcome) bool { return o.Result == "refused" })
	if !o.Visible || !strings.Contains(o.Text, "already answered: no") || !strings.Contains(o.Text, "(yes) was not taken") {
		t.Errorf("the loser's outcome: %+v", o)
	}
	opsScreenshot(t, ctx, "live-page-answer-outcome.png")
	s := openSpool(t, dir, 200)
	opsWaitEnded(t, s, job, 30*time.Second)
	if tail, err := s.LastEvents(job, 50); err == nil {
		found := false
		for _, ev := range tail.Events {
			found = found || ev.Text == "got yes no"
		}
		if !found {
			t.Errorf("the run did not take yes, then no: %+v", tail.Events)
		}
	}
}
