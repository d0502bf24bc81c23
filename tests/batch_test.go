package tests

// spool submit --batch: many jobs in one process, the specs made durable
// together before any marker appears; a bad line queues nothing.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/vmspool/vmspool/spool"
)

func TestSubmitBatch(t *testing.T) {
	dir := newSpool(t)
	// The chats' last runs left their documents.
	for _, d := range []string{"progress", "chats/c0"} {
		os.MkdirAll(filepath.Join(dir, d), 0o750)
	}
	os.WriteFile(filepath.Join(dir, "progress", "c0"), []byte(`{"job":"old","done":true}`), 0o640)
	os.WriteFile(filepath.Join(dir, "chats", "c0", "answer.json"), []byte(`{"job":"old"}`), 0o640)
	const n = 500
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"chat":"c%d","argv":["echo","%d"]}`+"\n", i%7, i)
		if i == 10 {
			b.WriteString("\n") // blank lines are skipped
		}
	}
	batch := filepath.Join(t.TempDir(), "batch.jsonl")
	os.WriteFile(batch, []byte(b.String()), 0o644)

	// The directory as the kernel reports it, while the batch runs.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, d := range []string{"", "progress", "chats/c0"} {
		if err := w.Add(filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		readies := 0
		for {
			select {
			case ev := <-w.Events:
				rel, _ := filepath.Rel(dir, ev.Name)
				if strings.HasPrefix(filepath.Base(rel), ".") || !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Remove) {
					continue
				}
				seen = append(seen, rel)
				if strings.HasSuffix(rel, ".ready") {
					if readies++; readies == n {
						return
					}
				}
			case <-time.After(20 * time.Second):
				t.Error("not every marker was seen")
				return
			}
		}
	}()
	code, out, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "submit", "--batch", batch)
	if code != 0 {
		t.Fatalf("submit --batch: exit %d: %s", code, errs)
	}
	<-done
	ids := strings.Fields(out)
	if len(ids) != n {
		t.Fatalf("%d ids printed; want %d", len(ids), n)
	}
	// Every spec before the first marker; the chat's old documents gone
	// before it too.
	firstReady, lastSpec, progress := -1, -1, -1
	for i, s := range seen {
		switch {
		case strings.HasSuffix(s, ".ready") && firstReady < 0:
			firstReady = i
		case strings.HasSuffix(s, ".json") && !strings.Contains(s, "/"):
			lastSpec = i
		case s == "progress/c0":
			progress = i
		}
	}
	if !(lastSpec < firstReady && progress >= 0 && progress < firstReady) {
		t.Errorf("order: last spec at %d, progress/c0 removed at %d, first marker at %d", lastSpec, progress, firstReady)
	}
	if _, err := os.Stat(filepath.Join(dir, "chats", "c0", "answer.json")); err == nil {
		t.Error("the chat's old answer is still there")
	}
	s := openSpool(t, dir, 100)
	for i, id := range ids {
		sp, err := s.ReadSpec(id)
		if err != nil || sp.Argv[1] != fmt.Sprint(i) {
			t.Fatalf("job %d (%s): %v %+v", i, id, err, sp)
		}
		if st, _ := s.State(id); st != spool.Queued {
			t.Fatalf("job %s is %s", id, st)
		}
	}
	if code, out, _ := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "fsck"); code != 0 {
		t.Errorf("fsck after a batch: %d %s", code, out)
	}
	// They run.
	spooldStart(t, dir, "--workers", "4")
	for _, id := range ids[:20] {
		if r := waitEnd(t, s, id, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("%s ended %s", id, r.State)
		}
	}
}

func TestSubmitBatchBadLine(t *testing.T) {
	dir := newSpool(t)
	spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "submit", "--chat", "x", "--", "true")
	before := spoolcliTree(t, dir)
	for _, c := range []struct{ batch, want string }{
		{"{\"chat\":\"a\",\"argv\":[\"true\"]}\n{\"chat\":\"a\",\"argv\":[\"true\"]}\n{\"chat\":\"bad chat\",\"argv\":[\"true\"]}\n", "line 3: "},
		{"{\"chat\":\"a\",\"argv\":[\"true\"]}\nnot json\n", "line 2: "},
		{"{\"chat\":\"a\",\"argv\":[\"true\"],\"id\":\"j1\"}\n{\"chat\":\"a\",\"argv\":[\"true\"],\"id\":\"j1\"}\n", "twice in the batch"},
		{"{\"chat\":\"a\"}\n", "line 1: "},
		{"\n\n", "no spec"},
	} {
		f := filepath.Join(t.TempDir(), "b")
		os.WriteFile(f, []byte(c.batch), 0o644)
		code, out, errs := spoolcliRun(t, []string{"SPOOL_DIR=" + dir}, "submit", "--batch", f)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("batch %q: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.batch, code, out, errs, c.want)
		}
		if after := spoolcliTree(t, dir); after != before {
			t.Errorf("batch %q changed the tree:\n%s\nwas\n%s", c.batch, after, before)
		}
	}
}
