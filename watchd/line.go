package watchd

import (
	"encoding/json"
	"strings"

	"github.com/vmspool/vmspool/spool"
)

// StatusEvent is an Open WebUI status event, what `watchd follow --json`
// prints one a line so that a thin filter can forward it unchanged. Run is
// the same output with its structure, for a plugin that acts on it (opens
// a dialog for a question, reports the end's state); Open WebUI's emitter
// reads "type" and "data" only.
type StatusEvent struct {
	Type string     `json:"type"`
	Data StatusData `json:"data"`
	Run  *Message   `json:"vmspool,omitempty"`
}

// StatusData is the data of a StatusEvent. Done is true on the last one
// only: Open WebUI's spinner stops there.
type StatusData struct {
	Description string `json:"description"`
	Done        bool   `json:"done"`
}

// JSONLine returns the Open WebUI status event of o, with its newline,
// carrying o's structure under "vmspool" (the Message that watchd serve
// sends as an event's data).
func JSONLine(o Output) []byte {
	m := MessageOf(o)
	b, _ := json.Marshal(StatusEvent{Type: "status", Data: StatusData{Description: o.Text, Done: o.Kind == End}, Run: &m})
	return append(b, '\n')
}

// StatusLine returns one status event line.
func StatusLine(text string, done bool) []byte {
	b, _ := json.Marshal(StatusEvent{Type: "status", Data: StatusData{Description: text, Done: done}})
	return append(b, '\n')
}

// TextLine returns the terminal line of o, with its newline. A text of
// several lines (a gate's message) keeps them, indented under the first.
// Each line is escaped for the terminal (spool.Printable): the text is a
// progress document's, which anyone who can write the spool may have
// written, and a status of "\x1b[2J" printed raw would clear the screen.
func TextLine(o Output) []byte {
	lines := strings.Split(strings.TrimRight(o.Text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = spool.Printable(l)
	}
	text := strings.Join(lines, "\n  ")
	if o.Kind == End {
		return []byte("run " + spool.Printable(o.Job) + " " + text + "\n")
	}
	return []byte(text + "\n")
}
