package watchd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/watchd/web"
)

// WriteWait is how long a write to an event stream may wait for a client
// that stopped reading, unless ServerConfig.WriteWait says otherwise.
const WriteWait = 30 * time.Second

// DefaultListen is serve's address: loopback, since the documents hold
// what people asked and answered.
const DefaultListen = "127.0.0.1:8377"

// ServerConfig configures a Server.
type ServerConfig struct {
	Spool *spool.Spool
	Hub   *Hub
	Log   logrus.FieldLogger
	// MaxSubscribers caps the event streams open at once; one more is
	// refused with 503. Default 4096.
	MaxSubscribers int
	// KeepAlive is how often an idle stream gets a comment line, so that
	// proxies and browsers keep it open. Default 15s.
	KeepAlive time.Duration
	// MaxChats caps the chats listed by GET /chats. Default 500.
	MaxChats int
	// WriteWait is how long a write to an event stream may wait for a
	// client that stopped reading before its stream is dropped. Default
	// WriteWait (30s).
	WriteWait time.Duration
	// Metrics counts streams, events sent and requests; nil counts nothing.
	Metrics *ops.WatchdMetrics
	// NoAnswer refuses POST /chats/C/answer (403): the server then
	// changes nothing in the tree (watchd serve --no-answer).
	NoAnswer bool
}

// Server serves the chats' progress over HTTP: GET /chats/C the current
// document, GET /chats/C/events its events as server-sent events, GET /
// a page of the live runs, and POST /chats/C/answer, the one request that
// changes the tree: it answers the chat's open question, through package
// spool and by its rules (spool.AnswerQuestion). Every stream shares the
// one Hub.
type Server struct {
	cfg  ServerConfig
	log  logrus.FieldLogger
	subs atomic.Int64
	mux  *http.ServeMux
	enc  encodedEvents
}

// NewServer returns a Server over cfg.Hub.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = 4096
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.MaxChats <= 0 {
		cfg.MaxChats = 500
	}
	if cfg.WriteWait <= 0 {
		cfg.WriteWait = WriteWait
	}
	s := &Server{cfg: cfg, log: cfg.Log, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = ops.Discard()
	}
	m := cfg.Metrics
	// Routes are counted by a fixed name, never by path: chat ids would
	// make a series each.
	s.mux.Handle("GET /{$}", m.Instrument("page", http.HandlerFunc(s.servePage)))
	s.mux.Handle("GET /{file}", m.Instrument("page", http.HandlerFunc(s.servePage)))
	s.mux.Handle("GET /chats", m.Instrument("chats", http.HandlerFunc(s.serveChats)))
	s.mux.Handle("GET /chats/{chat}", m.Instrument("chat", http.HandlerFunc(s.serveDoc)))
	s.mux.Handle("GET /chats/{chat}/events", m.Instrument("events", http.HandlerFunc(s.serveEvents)))
	s.mux.Handle("POST /chats/{chat}/answer", m.Instrument("answer", http.HandlerFunc(s.serveAnswer)))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Subscribers returns how many event streams are open.
func (s *Server) Subscribers() int { return int(s.subs.Load()) }

// HTTPServer returns an http.Server for s on addr, with the timeouts a
// long-lived daemon needs (no write timeout: a stream lasts a run). Cancel
// base to end every open stream, then call Shutdown.
func (s *Server) HTTPServer(addr string, base context.Context) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
}

// connKey holds a request's connection in its context (HTTPServer), so
// that an event stream can size the connection's send buffer.
type connKey struct{}

// limitSendBuffer asks the kernel for a small send buffer on the
// request's connection, where the server made it (HTTPServer).
func limitSendBuffer(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(interface{ SetWriteBuffer(int) error }); ok {
		c.SetWriteBuffer(streamSendBuffer)
	}
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
}

// chatOf returns the request's chat id, or writes a 400 and returns "".
// A raw id never reaches a path.
func chatOf(w http.ResponseWriter, r *http.Request) string {
	chat := r.PathValue("chat")
	if err := spool.CheckChatID(chat); err != nil {
		httpError(w, http.StatusBadRequest, "watchd: %v", err)
		return ""
	}
	return chat
}

// servePage serves the live page (package web): index.html, its style
// and its script, nothing else.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	ctype := map[string]string{"": "text/html; charset=utf-8", "index.html": "text/html; charset=utf-8",
		"style.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}[file]
	if ctype == "" {
		http.NotFound(w, r)
		return
	}
	if file == "" {
		file = "index.html"
	}
	b, err := web.FS.ReadFile(file)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", web.CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	w.Write(b)
}

// ChatInfo is one line of GET /chats.
type ChatInfo struct {
	Chat    string      `json:"chat"`
	Job     string      `json:"job"`
	State   spool.State `json:"state"`
	Status  string      `json:"status"`
	Updated float64     `json:"updated"`
	Done    bool        `json:"done"`
}

// serveChats lists the chats that have a document, newest first. It reads
// the directory once per request, never per event.
func (s *Server) serveChats(w http.ResponseWriter, r *http.Request) {
	names, err := s.cfg.Spool.Names(spool.ProgressDir, s.cfg.MaxChats*2)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "watchd: %v", err)
		return
	}
	list := []ChatInfo{}
	for _, n := range names {
		if !spool.ValidID(n) || len(list) >= s.cfg.MaxChats {
			continue
		}
		doc, err := s.cfg.Spool.ReadProgress(n)
		if err != nil {
			continue
		}
		list = append(list, ChatInfo{Chat: n, Job: doc.Job, State: doc.State, Status: doc.Status, Updated: doc.Updated, Done: doc.Done})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Updated > list[j].Updated })
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}

func (s *Server) serveDoc(w http.ResponseWriter, r *http.Request) {
	chat := chatOf(w, r)
	if chat == "" {
		return
	}
	doc, err := s.cfg.Spool.ReadProgress(chat)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		httpError(w, http.StatusNotFound, "watchd: chat %s: no progress document (no run yet, or a new one just submitted)", chat)
	case err != nil:
		httpError(w, http.StatusInternalServerError, "watchd: %v", err)
	default:
		writeJSON(w, doc)
	}
}

// AnswerRequest is the body of POST /chats/C/answer (application/json):
// the question answered, as the page showed it (empty: whichever is
// open), and the answer.
type AnswerRequest struct {
	Question string  `json:"question"`
	Answer   *string `json:"answer"`
}

// maxAnswerBody bounds the body of an answer: an answer is at most
// spool.MaxEventText, which JSON may write six bytes a byte.
const maxAnswerBody = 64 << 10

// serveAnswer answers the chat's open question: the same document and the
// same rules as `spool answer` (spool.AnswerQuestion), so the first answer
// wins wherever it came from, and the chat's watchers see it at spoold's
// next flush, as any answer. 200 with the answer written; 409 when no
// question is open, another is, or it was answered already; 400 for what
// does not answer it; 403 from a browser on another origin, and when
// answering is off.
//
// Who may answer is who may read the chats here (Auth over TCP, the
// socket's mode). A browser's request must come from the page itself on
// either listener: Auth refuses a cookie from another origin, and here a
// request that carries an Origin or a Sec-Fetch-Site (a browser's, say
// through a proxy to the socket) must name this server too. The body must
// be application/json, which no cross-site form can send without a CORS
// preflight that watchd never answers.
func (s *Server) serveAnswer(w http.ResponseWriter, r *http.Request) {
	if s.cfg.NoAnswer {
		httpError(w, http.StatusForbidden, "watchd: answering is off here (watchd serve --no-answer): answer with spool answer on the host")
		return
	}
	if !BrowserSameOrigin(r) {
		httpError(w, http.StatusForbidden, "watchd: %s from another origin refused", r.Method)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "watchd: an answer is sent as application/json: {\"question\": \"Q\", \"answer\": \"TEXT\"}")
		return
	}
	chat := chatOf(w, r)
	if chat == "" {
		return
	}
	var req AnswerRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAnswerBody))
	if err := dec.Decode(&req); err != nil || req.Answer == nil {
		httpError(w, http.StatusBadRequest, "watchd: the body is not an answer: want {\"question\": \"Q\", \"answer\": \"TEXT\"}")
		return
	}
	a, err := s.cfg.Spool.AnswerQuestion(chat, req.Question, *req.Answer)
	log := s.log.WithFields(logrus.Fields{"chat": chat, "question": req.Question, "remote": r.RemoteAddr})
	switch {
	case errors.Is(err, spool.ErrNoQuestion), errors.Is(err, spool.ErrAnswered):
		httpError(w, http.StatusConflict, "watchd: %v", err)
	case errors.Is(err, spool.ErrBadAnswer), errors.Is(err, spool.ErrInvalidID):
		httpError(w, http.StatusBadRequest, "watchd: %v", err)
	case err != nil:
		log.WithError(err).Warn("answer not written")
		httpError(w, http.StatusInternalServerError, "watchd: %v", err)
	default:
		log.WithField("job", a.Job).Info("question answered over HTTP")
		writeJSON(w, a)
	}
}

// BrowserSameOrigin reports whether a request either comes from no
// browser (it carries neither Origin nor Sec-Fetch-Site: a program, curl,
// the Python client) or comes from a page of this server (SameOrigin).
func BrowserSameOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return true
	}
	return SameOrigin(r)
}

// Message is the data of one server-sent event.
type Message struct {
	Job      string          `json:"job"`
	Seq      int64           `json:"seq"`
	Kind     Kind            `json:"kind"`
	Text     string          `json:"text"`
	Event    *spool.Event    `json:"event,omitempty"`
	Question *spool.Question `json:"question,omitempty"`
	Skipped  int64           `json:"skipped,omitempty"`
	State    spool.State     `json:"state,omitempty"`
	Exit     *int            `json:"exit,omitempty"`
	Error    *string         `json:"error,omitempty"`
}

// MessageOf is o as a Message.
func MessageOf(o Output) Message {
	return Message{Job: o.Job, Seq: o.Seq, Kind: o.Kind, Text: o.Text, Event: o.Event, Question: o.Question,
		Skipped: o.Skipped, State: o.State, Exit: o.Exit, Error: o.Error}
}

// EventID is the SSE id of an output: its seq, or "<seq>.end" for the end,
// so that a client that had the end can say so when it reconnects.
func EventID(o Output) string {
	if o.Kind == End {
		return strconv.FormatInt(o.Seq, 10) + ".end"
	}
	return strconv.FormatInt(o.Seq, 10)
}

// ParseEventID reads a Last-Event-ID.
func ParseEventID(id string) (last int64, ended bool, ok bool) {
	id = strings.TrimSpace(id)
	if id == "" {
		return 0, false, true
	}
	if n, found := strings.CutSuffix(id, ".end"); found {
		id, ended = n, true
	}
	last, err := strconv.ParseInt(id, 10, 64)
	if err != nil || last < 0 {
		return 0, false, false
	}
	return last, ended, true
}

// SSE writes one output as a server-sent event.
func SSE(o Output) []byte {
	b, _ := json.Marshal(MessageOf(o))
	return fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", EventID(o), o.Kind, b)
}

// metricKind is the kind an output is counted under: the end, or a status
// (every other line a person reads).
func metricKind(k Kind) string {
	if k == End {
		return "end"
	}
	return "status"
}

// serveEvents streams the chat's run as server-sent events, with the
// guards applied for this subscriber: ?job=J follows that job (whatever
// its stamp), and a Last-Event-ID (or ?last=N) resumes after that seq. The
// stream ends after the end event; a client that says it had the end gets
// 204, which tells an EventSource not to reconnect.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	began := spool.Now()
	chat, job, last, ok := eventsRequest(w, r)
	if !ok {
		return
	}
	if n := s.subs.Add(1); n > int64(s.cfg.MaxSubscribers) {
		s.subs.Add(-1)
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "watchd: too many subscribers (%d); try again later", s.cfg.MaxSubscribers)
		return
	}
	defer s.subs.Add(-1)
	defer s.cfg.Metrics.Subscribed()()
	wt, err := NewFollower(s.cfg.Spool, s.cfg.Hub, chat, Guards{Began: began, Job: job, Last: last})
	if err != nil {
		httpError(w, http.StatusBadRequest, "watchd: %v", err)
		return
	}
	defer wt.Close()
	limitSendBuffer(r)
	log := s.log.WithFields(logrus.Fields{"chat": chat, "job": job, "remote": r.RemoteAddr, "last": last})
	log.Info("subscriber connected")
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A client that stops reading is dropped once a write has waited
	// the write wait, rather than holding its handler for ever.
	rc := http.NewResponseController(w)
	send := func(parts ...[]byte) error {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteWait))
		for _, b := range parts {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if err := send(fmt.Appendf(nil, "retry: 2000\n: chat %s\n\n", chat)); err != nil {
		log.WithError(err).Info("subscriber gone before the first event")
		return
	}
	sent, why := s.stream(r.Context(), wt, send)
	log.WithFields(logrus.Fields{"sent": sent, "followed": wt.Tally().Job(), "why": why}).Info("subscriber disconnected")
}

// eventsRequest reads what a request for a chat's events asks: the chat,
// the job (if one), and the last event the client saw. ok is false when
// it has been answered here (bad input, or a stream already ended: 204).
func eventsRequest(w http.ResponseWriter, r *http.Request) (chat, job string, last int64, ok bool) {
	chat = chatOf(w, r)
	if chat == "" {
		return "", "", 0, false
	}
	q := r.URL.Query()
	job = q.Get("job")
	if job != "" {
		if err := spool.CheckJobID(job); err != nil {
			httpError(w, http.StatusBadRequest, "watchd: %v", err)
			return "", "", 0, false
		}
	}
	lastID := r.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = q.Get("last")
	}
	last, ended, ok := ParseEventID(lastID)
	if !ok {
		httpError(w, http.StatusBadRequest, "watchd: Last-Event-ID %q: want a seq like 12 (or 12.end)", lastID)
		return "", "", 0, false
	}
	if ended {
		w.WriteHeader(http.StatusNoContent)
		return "", "", 0, false
	}
	return chat, job, last, true
}

// MaxStreamWrite bounds what an event stream writes at a time, and so
// what a subscriber holds while its client is slow: the write, and
// nothing of the documents it came from (Follower.NextFunc). One event
// encoded past it (8 KiB of control characters, which JSON writes six
// bytes each, twice: text and event) has its texts clipped for the stream;
// the document and <job>.events keep them whole.
const MaxStreamWrite = 32 << 10

// streamSendBuffer is the kernel's send buffer asked for a stream's
// connection, so that a client that stops reading pins little kernel
// memory either (the kernel doubles it): a stream carries a person's
// statuses, not bulk data.
const streamSendBuffer = 32 << 10

// stream sends the follower's events, and a keep-alive comment while none
// come, until the run ends, the client goes or a write fails; it returns
// how many events were sent and why it stopped. Each turn writes at most
// MaxStreamWrite; what did not fit is not held but fed again, newest
// first, once the write is done. An event's bytes are the Server's, made
// once for every subscriber (encodedEvents): a stream stuck on a client
// that does not read holds references to them, not copies.
func (s *Server) stream(ctx context.Context, wt *Follower, send func(...[]byte) error) (sent int, why string) {
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	var parts [][]byte
	size := 0
	emit := func(o Output) bool {
		b := s.enc.get(o)
		if size > 0 && size+len(b) > MaxStreamWrite {
			return false // next turn
		}
		parts, size = append(parts, b), size+len(b)
		s.cfg.Metrics.Sent(metricKind(o.Kind))
		return true
	}
	for {
		clear(parts)
		parts, size = parts[:0], 0
		n, err := wt.NextFunc(ctx, keep.C, emit)
		if errors.Is(err, ErrEnded) {
			return sent, "run ended"
		} else if err != nil {
			return sent, "client gone or server stopping"
		}
		if n == 0 {
			parts = append(parts, keepAlive)
			s.cfg.Metrics.Sent("ping")
		}
		sent += n
		if err := send(parts...); err != nil {
			return sent, "write failed: " + err.Error()
		}
	}
}

var keepAlive = []byte(": keep-alive\n\n")

// encodedEvents holds the server-sent bytes of the latest events (at most
// encodedCacheSize), made once however many subscribers send them: an
// event's output is the same for every subscriber of its chat (a job's
// seq names one line of its events, never rewritten). What depends on the
// subscriber (a gap, the end, a status-only document's status) is made
// for it alone, and is small.
type encodedEvents struct {
	mu   sync.Mutex
	m    map[eventKey]*encoded
	ring []eventKey
	next int
}

const encodedCacheSize = 1024

type eventKey struct {
	job  string
	seq  int64
	kind Kind
}

type encoded struct {
	once sync.Once
	b    []byte
}

func (c *encodedEvents) get(o Output) []byte {
	if o.Event == nil || o.Kind == End || o.Kind == Gap {
		return BoundedSSE(o, MaxStreamWrite)
	}
	k := eventKey{o.Job, o.Seq, o.Kind}
	c.mu.Lock()
	e := c.m[k]
	if e == nil {
		if c.m == nil {
			c.m = make(map[eventKey]*encoded, encodedCacheSize)
			c.ring = make([]eventKey, encodedCacheSize)
		}
		if old := c.ring[c.next]; c.m[old] != nil {
			delete(c.m, old)
		}
		e = &encoded{}
		c.m[k], c.ring[c.next] = e, k
		c.next = (c.next + 1) % encodedCacheSize
	}
	c.mu.Unlock()
	// Made once: the subscribers that come for it meanwhile wait for it
	// rather than each making its own.
	e.once.Do(func() { e.b = BoundedSSE(o, MaxStreamWrite) })
	return e.b
}

// BoundedSSE is SSE(o), its texts clipped (each ending with "…") so that
// the event takes at most max bytes. The size is reckoned before encoding
// (jsonSize), so an event is encoded once, at the size it is sent.
func BoundedSSE(o Output, max int) []byte {
	for limit := spool.MaxEventText / 2; sseSize(o) > max && limit >= 16; limit /= 2 {
		o = clipOutput(o, limit)
	}
	return SSE(o)
}

// sseSize is at least the size of SSE(o): its texts as JSON writes them
// at worst (jsonSize), and a generous allowance for the rest (ids, seqs,
// field names), which are bounded.
func sseSize(o Output) int {
	n := 1024 + jsonSize(o.Text)
	if ev := o.Event; ev != nil {
		n += jsonSize(ev.Text) + jsonSize(ev.Worker) + jsonSize(ev.ID) + jsonSize(ev.Type) + jsonSize(string(ev.State))
		for _, opt := range ev.Options {
			n += 3 + jsonSize(opt)
		}
	}
	if q := o.Question; q != nil {
		n += jsonSize(q.Text) + jsonSize(q.ID)
		for _, opt := range q.Options {
			n += 3 + jsonSize(opt)
		}
	}
	if o.Error != nil {
		n += jsonSize(*o.Error)
	}
	return n + jsonSize(o.Job)
}

// jsonSize is at least the length of s as a JSON string: a byte is one,
// or six when encoding/json escapes it (control bytes, HTML's < > &,
// U+2028 and U+2029, each byte of invalid UTF-8); quotes and backslashes
// are two.
func jsonSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// clipOutput is o with every text of it cut to limit bytes (an option to
// a sixteenth of that), in copies: o and what it points to are shared.
func clipOutput(o Output, limit int) Output {
	o.Text = spool.Clip(o.Text, limit)
	if o.Event != nil {
		ev := *o.Event
		ev.Text = spool.Clip(ev.Text, limit)
		ev.Options = clipOptions(ev.Options, limit/16)
		ev.Worker = spool.Clip(ev.Worker, limit)
		o.Event = &ev
	}
	if o.Question != nil {
		q := *o.Question
		q.Text = spool.Clip(q.Text, limit)
		q.Options = clipOptions(q.Options, limit/16)
		o.Question = &q
	}
	if o.Error != nil {
		e := spool.Clip(*o.Error, limit)
		o.Error = &e
	}
	return o
}

func clipOptions(opts []string, limit int) []string {
	if opts == nil {
		return nil
	}
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = spool.Clip(o, limit)
	}
	return out
}
