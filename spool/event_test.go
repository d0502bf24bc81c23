package spool

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
)

// The seq of an event is its line number, whoever appended the lines, and
// concurrent appenders never share a number or a line.
func TestAppendEventSeqIsLineNumber(t *testing.T) {
	s := testSpool(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 25; k++ {
				if _, err := s.AppendEvent("j", Event{Text: strings.Repeat("x", 3000)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f, _ := os.Open(s.Path("j.events"))
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := int64(0)
	for sc.Scan() {
		n++
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d is not one whole event: %v", n, err)
		}
		if ev.Seq != n || ev.Type != EventStatus || ev.At == 0 {
			t.Fatalf("line %d has seq %d type %q", n, ev.Seq, ev.Type)
		}
	}
	if n != 200 {
		t.Fatalf("%d lines, want 200", n)
	}
}

func TestAppendEventAfterShellLines(t *testing.T) {
	s := testSpool(t)
	writeRaw(t, s, "j.events", "plain line\nhalf a line")
	ev, err := s.AppendEvent("j", Event{Type: EventQuestion, ID: "q1", Text: "ok?", Options: []string{"y", "n"}})
	if err != nil || ev.Seq != 3 {
		t.Fatalf("seq after a line and a half: %d, %v", ev.Seq, err)
	}
	if _, err := s.AppendEvent("j", Event{Type: EventQuestion, ID: "x $(touch /tmp/p) #", Text: "ok?"}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("a question with an invalid id appended: %v", err)
	}
	long, _ := s.AppendEvent("j", Event{Text: strings.Repeat("é", MaxEventText)})
	if len(long.Text) > MaxEventText+len("…") || !strings.HasSuffix(long.Text, "…") {
		t.Errorf("text not clipped: %d bytes", len(long.Text))
	}
	os.Symlink("/etc/passwd", s.Path("k.events"))
	if _, err := s.AppendEvent("k", Event{Text: "x"}); err == nil {
		t.Error("append through a symlink: no error")
	}
	if _, err := s.OpenLog("k/../x"); err == nil {
		t.Error("OpenLog of a bad id: no error")
	}
}

func TestParseEventLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		typ  string
		text string
		id   string
	}{
		{`{"seq":99,"type":"status","text":"hi"}`, EventStatus, "hi", ""},
		{`{"type":"question","id":"q1","text":"ok?","options":["a"]}`, EventQuestion, "ok?", "q1"},
		{`{"text":"no type"}`, EventStatus, "no type", ""},
		{`plain text from a shell`, EventStatus, "plain text from a shell", ""},
		{`  padded  ` + "\r", EventStatus, "padded", ""},
		{`{"type":5}`, EventStatus, `{"type":5}`, ""},
		{"bad \xff utf8", EventStatus, "bad \uFFFD utf8", ""},
		{`{"type":"status","text":"bad ` + "\xff" + `"}`, EventStatus, "bad \uFFFD", ""},
		{``, EventStatus, "", ""},
		// A question id is an id: one a shell would read as code is
		// refused, and the question read as a status that asks nothing.
		{`{"type":"question","id":"x $(touch /tmp/p) #","text":"ok?","options":["y"]}`, EventStatus,
			"(not relayed as a question: its id is an " + ErrInvalidID.Error() + ") ok?", ""},
		{`{"type":"answer","id":"a'b","text":"yes"}`, EventStatus,
			"(not relayed as an answer: its id is an " + ErrInvalidID.Error() + ") yes", ""},
		{`{"type":"status","id":"../x","text":"hi"}`, EventStatus, "hi", ""},
		{`{"type":"question","id":"q-01.x_y","text":"ok?"}`, EventQuestion, "ok?", "q-01.x_y"},
	} {
		ev := ParseEventLine([]byte(tc.line), 7)
		if ev.Seq != 7 || ev.Type != tc.typ || ev.Text != tc.text || ev.ID != tc.id {
			t.Errorf("ParseEventLine(%q) = %+v", tc.line, ev)
		}
	}
}

func TestEventReader(t *testing.T) {
	s := testSpool(t)
	r := s.NewEventReader("j")
	if evs, err := r.Read(); err != nil || len(evs) != 0 {
		t.Fatalf("missing file: %v, %v", evs, err)
	}
	writeRaw(t, s, "j.events", "one\n{\"type\":\"start\",\"text\":\"two\"}\nthr")
	evs, err := r.Read()
	if err != nil || len(evs) != 2 || evs[0].Text != "one" || evs[1].Type != EventStart || evs[1].Seq != 2 || evs[0].At == 0 {
		t.Fatalf("first read: %+v, %v", evs, err)
	}
	f, _ := os.OpenFile(s.Path("j.events"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("ee\n")
	// A line longer than MaxEventLine, written in pieces.
	chunk := strings.Repeat("y", 100<<10)
	for i := 0; i < 3; i++ {
		f.WriteString(chunk)
	}
	evs, _ = r.Read()
	if len(evs) != 1 || evs[0].Text != "three" || evs[0].Seq != 3 {
		t.Fatalf("second read: %+v", evs)
	}
	f.WriteString("\nafter\n")
	f.Close()
	evs, _ = r.Read()
	if len(evs) != 2 || !strings.Contains(evs[0].Text, "too long") || evs[0].Seq != 4 || evs[1].Text != "after" || evs[1].Seq != 5 {
		t.Fatalf("long line: %+v", evs)
	}
	if r.Seq() != 5 {
		t.Errorf("Seq = %d", r.Seq())
	}
	if evs, _ := r.Read(); len(evs) != 0 {
		t.Errorf("a line returned twice: %+v", evs)
	}
}
