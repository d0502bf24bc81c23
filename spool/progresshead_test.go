package spool

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestProgressHead: the head's fields come from at most ProgressHeadMax
// bytes, whatever follows them; a cut field is left empty; a link or a
// document that is no object is refused.
func TestProgressHead(t *testing.T) {
	s, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.MkdirAll(s.Path(ProgressDir), 0o750); err != nil {
		t.Fatal(err)
	}
	head := `{"job":"J1","chat":"c","seq":7,"updated":1700000000.5,"started":1700000000,"done":false,"state":"waiting","status":"asks"`
	// A document's events, 16 MB of them, and what a head never reads
	// after them: a broken tail.
	huge := head + `,"events":[` + strings.Repeat(`{"seq":1,"type":"status","text":"x"},`, 400_000) + `BROKEN`
	for _, c := range []struct {
		name, doc string
		want      Progress
		err       error
	}{
		{"whole", head + `,"events":[],"question":null}`, Progress{Job: "J1", Chat: "c", Seq: 7, Updated: 1700000000.5, Started: 1700000000, State: "waiting", Status: "asks"}, nil},
		{"huge", huge, Progress{Job: "J1", Chat: "c", Seq: 7, Updated: 1700000000.5, Started: 1700000000, State: "waiting", Status: "asks"}, nil},
		{"cut status", `{"job":"J2","state":"running","status":"` + strings.Repeat("y", ProgressHeadMax), Progress{Job: "J2", State: "running"}, nil},
		{"unknown first", `{"x":[1,2,3],"job":"J3","done":true}`, Progress{Job: "J3", Done: true}, nil},
		{"bad chat", `{"job":"J4","chat":"../x"}`, Progress{Job: "J4"}, nil},
		{"not an object", `["job"]`, Progress{}, ErrCorrupt},
		{"empty", ``, Progress{}, ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(s.Path(ProgressPath("c")), []byte(c.doc), 0o640); err != nil {
				t.Fatal(err)
			}
			p, st, err := s.ProgressHead("c")
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err %v; want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Job != c.want.Job || p.Chat != c.want.Chat || p.Seq != c.want.Seq || p.Updated != c.want.Updated ||
				p.Started != c.want.Started || p.Done != c.want.Done || p.State != c.want.State || p.Status != c.want.Status {
				t.Errorf("head %+v; want %+v", *p, c.want)
			}
			if len(p.Events) != 0 || p.Question != nil {
				t.Errorf("the head holds events or a question: %+v", *p)
			}
			if st2, err := s.ProgressStamp("c"); err != nil || st2 != st {
				t.Errorf("ProgressStamp %v, %v; want the stamp of the version read", st2, err)
			}
		})
	}
	if err := os.Symlink("/etc/passwd", s.Path(ProgressPath("l"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ProgressHead("l"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a link: %v; want ErrNotRegular", err)
	}
	if _, err := s.ProgressStamp("l"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a link's stamp: %v; want ErrNotRegular", err)
	}
	if _, _, err := s.ProgressHead("../x"); err == nil {
		t.Error("an invalid chat id was read")
	}
}
