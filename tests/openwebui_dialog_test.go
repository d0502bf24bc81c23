package tests

// Issue 32, 3: a question shown as asked. Open WebUI draws a dialog's
// title as text, and its message as plain text in some versions and as
// markdown in others (marked, then DOMPurify, which keeps images and
// links). The Open WebUI tools put the run's text in the title only
// (vmspool.dialog_event): here each dialog the tools make for crafted
// questions is drawn both ways in chromium, with marked and DOMPurify as
// Debian packages them, and no element is made from the run's text, no
// address is fetched, and the title reads as asked. A control draws the
// question itself as a markdown message, and must fetch: the test can
// see a fetch.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const (
	debianMarked    = "/usr/share/javascript/marked/marked.min.js"
	debianDOMPurify = "/usr/share/nodejs/dompurify/dist/purify.min.js"
)

const dialogPage = `<!doctype html><meta charset="utf-8"><title>dialogs</title>
<script src="/marked.js"></script><script src="/purify.js"></script>
<body><div id="out"></div></body>`

// dialogDrawJS draws one dialog as Open WebUI's ConfirmDialog does: the
// title as text ({title}), the message as text and, apart, as
// DOMPurify.sanitize(marked.parse(message)). It returns what a person
// reads and which elements were made.
const dialogDrawJS = `(() => {
  const ev = %s;
  const out = document.getElementById("out");
  const box = document.createElement("div");
  const title = document.createElement("div");
  title.textContent = ev.data.title || "";
  const plain = document.createElement("div");
  plain.textContent = ev.data.message || "";
  const md = document.createElement("div");
  md.innerHTML = DOMPurify.sanitize(marked.parse(ev.data.message || ""));
  box.append(title, plain, md);
  out.append(box);
  const made = el => [...el.querySelectorAll("*")].map(e => e.tagName.toLowerCase());
  return { title: title.textContent, titleMade: made(title), plainMade: made(plain),
           mdMade: made(md), mdText: md.textContent };
})()`

type drawnDialog struct {
	Title     string   `json:"title"`
	TitleMade []string `json:"titleMade"`
	PlainMade []string `json:"plainMade"`
	MdMade    []string `json:"mdMade"`
	MdText    string   `json:"mdText"`
}

func TestOpenWebUIDialogShownAsAsked(t *testing.T) {
	chromium := opsChromium(t)
	for _, f := range []string{debianMarked, debianDOMPurify} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s is missing (apt-get install libjs-marked node-dompurify): the dialog's markdown drawing needs it", f)
		}
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	var fetched atomic.Int64
	var paths atomic.Value
	paths.Store("")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		paths.Store(paths.Load().(string) + " " + r.URL.Path)
		w.Header().Set("Content-Type", "image/gif")
	}))
	defer evil.Close()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/marked.js":
			http.ServeFile(w, r, debianMarked)
		case "/purify.js":
			http.ServeFile(w, r, debianDOMPurify)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, dialogPage)
		}
	}))
	defer page.Close()

	e := evil.URL
	questions := []map[string]any{
		{"id": "q1", "text": "Deploy <img src=" + e + "/img> now?", "options": []string{"yes", "no"}},
		{"id": "q2", "text": "Which? ![x](" + e + "/md.png) [a link](" + e + "/link) <" + e + "/auto>", "options": []string{"a", "<img src=" + e + "/opt>"}},
		{"id": "q3", "text": "# Title\n**bold** _em_ `code` &lt;b&gt; <script>fetch('" + e + "/script')</script>\n\n- item\n\n> quote"},
		{"id": "q4", "text": "Name? <iframe src=" + e + "/frame></iframe>", "allow_empty": true},
	}
	qs, _ := json.Marshal(questions)
	script := `import json, sys
sys.path.insert(0, sys.argv[1])
import vmspool
qs = [vmspool.Question(q) for q in json.load(sys.stdin)]
evs = [vmspool.dialog_event(q) for q in qs]
evs += [vmspool.dialog_event(qs[0], vmspool._refused("x: is not one of its options (a, b)"))]
print(json.dumps(evs))`
	cmd := exec.Command(python, "-c", script, filepath.Join("..", "clients", "python"))
	cmd.Stdin = strings.NewReader(string(qs))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the tools' dialogs: %v", err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(out, &events); err != nil {
		t.Fatal(err)
	}

	ctx := opsBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL), chromedp.WaitReady("#out")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	draw := func(ev []byte) *drawnDialog {
		d, err := chromedp.Run(ctx, chromedp.Evaluate[*drawnDialog](fmt.Sprintf(dialogDrawJS, ev)))
		if err != nil || d == nil {
			t.Fatalf("drawing %s: %v", ev, err)
		}
		return d
	}
	for i, raw := range events {
		var ev struct {
			Data struct {
				Title   string `json:"title"`
				Message string `json:"message"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		q := questions[i%len(questions)]
		d := draw(raw)
		if len(d.TitleMade) != 0 || len(d.PlainMade) != 0 {
			t.Errorf("dialog %d: elements made from text: %v %v", i, d.TitleMade, d.PlainMade)
		}
		if !strings.HasPrefix(d.Title, q["text"].(string)) {
			t.Errorf("dialog %d: the title reads %q; want the question as asked, %q", i, d.Title, q["text"])
		}
		for _, tag := range d.MdMade {
			if tag != "p" {
				t.Errorf("dialog %d: its message drawn as markdown made <%s>: %q", i, tag, ev.Data.Message)
			}
		}
		if strings.Contains(ev.Data.Message, e) || strings.Contains(ev.Data.Message, "<") {
			t.Errorf("dialog %d: the run's text is in the message: %q", i, ev.Data.Message)
		}
	}
	// A fetch that must not come: a short wait for one in flight (the
	// control case below waits for its own fetch, which does come).
	time.Sleep(500 * time.Millisecond)
	if n := fetched.Load(); n != 0 {
		t.Errorf("drawing the dialogs fetched %d addresses:%s", n, paths.Load())
	}

	// The control: the question itself as a markdown message fetches.
	control, _ := json.Marshal(map[string]any{"type": "confirmation", "data": map[string]string{"title": "", "message": questions[1]["text"].(string)}})
	d := draw(control)
	made := strings.Join(d.MdMade, " ")
	if !strings.Contains(made, "img") || !strings.Contains(made, "a") {
		t.Errorf("the control made %q; want an img and a link (marked and DOMPurify as Open WebUI uses them)", made)
	}
	eventually(t, 10*time.Second, 20*time.Millisecond, "the control's image to be fetched", func() bool { return fetched.Load() > 0 })
}
