package watchd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sync/atomic"
	"time"

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
	// MaxChats caps the chats listed by GET /chats, but for those waiting
	// for an answer, which are always listed. Default 500.
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
	cfg   ServerConfig
	log   logrus.FieldLogger
	subs  atomic.Int64
	mux   *http.ServeMux
	enc   encodedEvents
	chats chatList
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

// serveChats lists the chats that have a document, newest first: every
// chat waiting for an answer and the newest others, up to MaxChats (the
// waiting ones beyond it). It reads the directory once per request, never
// per event, and each document's head only when it changed (chatList).
func (s *Server) serveChats(w http.ResponseWriter, r *http.Request) {
	list, err := s.chats.list(s.cfg.Spool, s.cfg.MaxChats)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "watchd: %v", err)
		return
	}
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
