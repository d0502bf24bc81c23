package watchd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

// FuzzOutputLines: whatever a progress document holds (a text with
// newlines, invalid UTF-8, a question without options), what watchd
// prints of it keeps its framing: one Open WebUI status event a line for
// `follow --json`, and server-sent events whose data is one JSON line, so
// that no document can forge or split an event of the stream.
func FuzzOutputLines(f *testing.F) {
	f.Add([]byte(`{"job":"j","updated":1001,"seq":2,"status":"a\nb","events":[{"seq":1,"type":"status","text":"line\n\nid: 9\nevent: end\ndata: {}"},{"seq":2,"type":"gate","text":"refused:\nno git"}]}`))
	f.Add([]byte(`{"job":"j","updated":1001,"seq":1,"question":{"id":"q","text":"ok?\r\nreally"},"events":[{"seq":1,"type":"question","id":"q","text":"ok?","options":["a\nb"]}]}`))
	f.Add([]byte(`{"job":"j","updated":1001,"seq":3,"done":true,"state":"failed","exit":3,"error":"boom\n\ndata: x","events":[]}`))
	f.Add([]byte("{\"job\":\"j\",\"updated\":1001,\"status\":\"\xff\xfe\",\"seq\":5}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := spool.ParseProgress(b)
		if err != nil {
			return
		}
		fl := NewTally(Guards{Began: 1000})
		for _, o := range fl.Feed(doc) {
			line := JSONLine(o)
			if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
				t.Fatalf("status line of %+v is not one line: %q", o, line)
			}
			var ev StatusEvent
			if err := json.Unmarshal(line, &ev); err != nil || ev.Type != "status" || ev.Data.Done != (o.Kind == End) {
				t.Fatalf("status line %q: %+v %v", line, ev, err)
			}
			frame := string(SSE(o))
			if !strings.HasSuffix(frame, "\n\n") || strings.Count(frame, "\n\n") != 1 {
				t.Fatalf("SSE frame of %+v is not one event: %q", o, frame)
			}
			lines := strings.Split(strings.TrimSuffix(frame, "\n\n"), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "event: ") || !strings.HasPrefix(lines[2], "data: ") {
				t.Fatalf("SSE frame %q", frame)
			}
			var m Message
			if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &m); err != nil || m.Seq != o.Seq || m.Kind != o.Kind {
				t.Fatalf("SSE data %q: %+v %v", lines[2], m, err)
			}
			if id, ended, ok := ParseEventID(strings.TrimPrefix(lines[0], "id: ")); o.Seq >= 0 && (!ok || id != o.Seq || ended != (o.Kind == End)) {
				t.Fatalf("SSE id %q of %+v", lines[0], o)
			}
		}
	})
}
