package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
)

// sseEvent is one server-sent event as a client reads it: its id, its
// type and its data line, undecoded.
type sseEvent struct {
	id, event, data string
}

// decode is the data, a JSON object.
func (e sseEvent) decode() map[string]any {
	var m map[string]any
	json.Unmarshal([]byte(e.data), &m)
	return m
}

// text is the data's "text" without decoding the JSON (a benchmark reads
// thousands): the text is the only string field before "event" in a
// status message. ok is false when there is none.
func (e sseEvent) text() (string, bool) {
	i := strings.Index(e.data, `"text":"`)
	if i < 0 {
		return "", false
	}
	rest := e.data[i+8:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// sseReader is the one reader of event streams of the tests: each next
// is the next event (comments and keep-alives skipped), false at the
// stream's end.
type sseReader struct{ rd *bufio.Reader }

func newSSEReader(body io.Reader) *sseReader { return &sseReader{bufio.NewReader(body)} }

func (r *sseReader) next() (sseEvent, bool) {
	var ev sseEvent
	for {
		line, err := r.rd.ReadString('\n')
		if err != nil {
			return sseEvent{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				return ev, true
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}
