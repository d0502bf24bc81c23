package watchd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
)

// HubConfig configures a Hub.
type HubConfig struct {
	// Poll, if not zero, replaces inotify: every Poll progress/ is stat'd
	// (spool.Watch's poll), and while it moved the subscribed chats'
	// documents are stat'd (one lstat each, never a readdir) and read if
	// they changed. For NFS, FUSE and trees shared between hosts, whose
	// changes inotify never sees.
	Poll time.Duration
	// Rescan is the safety net: every Rescan the subscribed chats'
	// documents are stat'd and read if they changed unseen (a watch lost
	// to an unmount, a missed event, a document written in place).
	// Default 5s.
	Rescan time.Duration
	// Log gets one line per warning: a document that does not parse, a
	// symlink in a document's place, a lost watch.
	Log logrus.FieldLogger
}

// Snapshot is a chat's document as read once for all its subscribers.
// Doc is nil when there is none, or when it cannot be read (Err says why).
// Subscribers share it and must not modify it.
type Snapshot struct {
	Doc *spool.Progress
	Err error
}

// Hub watches progress/ once and tells each subscriber of a chat when the
// chat's document changed, reading it once per change however many
// subscribe. A subscriber costs a small struct, and the Hub never waits
// for one: a subscriber holds only the newest snapshot, and a slow one
// skips those it had no time for.
type Hub struct {
	s   *spool.Spool
	cfg HubConfig
	log logrus.FieldLogger
	w   *spool.Watch // progress/

	mu    sync.Mutex
	chats map[string]*chatWatch
}

type chatWatch struct {
	chat string
	mu   sync.Mutex // held across a read and its delivery, so a newer read is never overtaken by an older one
	subs map[*Sub]struct{}
	seen spool.FileStamp // the file last read, for the poll and the safety net
	snap Snapshot
	read bool   // snap holds a read made while subscribed
	warn string // the last warning logged, so each problem is said once
}

// NewHub starts watching the spool's progress/ directory (creating it,
// empty, if it is missing: a follower may start before any daemon did; and
// again should it be removed). The watch is in place when NewHub returns,
// so a document read after it can never miss a later change. Run must be
// called to deliver changes.
func NewHub(s *spool.Spool, cfg HubConfig) (*Hub, error) {
	if cfg.Rescan <= 0 {
		cfg.Rescan = 5 * time.Second
	}
	h := &Hub{s: s, cfg: cfg, log: cfg.Log, chats: map[string]*chatWatch{}}
	if h.log == nil {
		h.log = ops.Discard()
	}
	w, err := s.Watch(spool.WatchConfig{Poll: cfg.Poll, Rescan: cfg.Rescan, Make: true}, spool.ProgressDir)
	if err != nil {
		return nil, fmt.Errorf("%w (try --poll 1s)", err)
	}
	h.w = w
	return h, nil
}

// Close stops the watch.
func (h *Hub) Close() error { return h.w.Close() }

// Run delivers changes until ctx is done. A chat's document is read at
// each change of its name, and at each Look of progress/ if its file
// changed (all of them, if events were lost or progress/ was replaced).
func (h *Hub) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-h.w.C:
			if !ok {
				return ctx.Err()
			}
			if c.Op != spool.Look {
				if cw := h.lookup(c.Name); cw != nil {
					h.refresh(cw, false)
				}
				continue
			}
			if c.Err != nil {
				h.log.WithError(c.Err).Warn("progress/: rereading every followed chat")
			}
			h.scan(c.Err != nil)
		}
	}
}

func (h *Hub) lookup(chat string) *chatWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.chats[chat]
}

// scan rereads the subscribed chats' documents: all of them if force, else
// those whose file changed since it was last read (one lstat each).
func (h *Hub) scan(force bool) {
	h.mu.Lock()
	cws := make([]*chatWatch, 0, len(h.chats))
	for _, cw := range h.chats {
		cws = append(cws, cw)
	}
	h.mu.Unlock()
	for _, cw := range cws {
		h.refresh(cw, !force)
	}
}

// refresh reads the chat's document and hands it to every subscriber. With
// ifChanged, it first compares the file with the one last read and does
// nothing if it is the same.
func (h *Hub) refresh(cw *chatWatch, ifChanged bool) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	name := spool.ProgressPath(cw.chat)
	var id spool.FileStamp
	if fi, err := h.s.Stat(name); err == nil {
		id = spool.FileStampOf(fi)
	}
	if ifChanged && cw.read && id == cw.seen {
		return
	}
	cw.seen = id
	doc, err := h.s.ReadProgress(cw.chat)
	var snap Snapshot
	switch {
	case err == nil:
		snap.Doc = doc
		cw.warn = ""
	case errors.Is(err, fs.ErrNotExist):
		cw.warn = ""
	default:
		snap.Err = err
		if msg := err.Error(); msg != cw.warn {
			cw.warn = msg
			h.log.WithField("chat", cw.chat).WithError(err).Warn("skipping a progress document that cannot be read")
		}
	}
	cw.snap, cw.read = snap, true
	for sub := range cw.subs {
		sub.put(snap)
	}
}

// Subscribe returns a subscription to the chat's document, holding the
// current one. Close it when done.
func (h *Hub) Subscribe(chat string) (*Sub, error) {
	if err := spool.CheckChatID(chat); err != nil {
		return nil, err
	}
	sub := &Sub{Chat: chat, hub: h, C: make(chan struct{}, 1)}
	h.mu.Lock()
	cw := h.chats[chat]
	if cw == nil {
		cw = &chatWatch{chat: chat, subs: map[*Sub]struct{}{}}
		h.chats[chat] = cw
	}
	cw.mu.Lock()
	cw.subs[sub] = struct{}{}
	read := cw.read
	if read {
		// Kept current by the watch since the chat's first subscriber.
		sub.put(cw.snap)
	}
	cw.mu.Unlock()
	h.mu.Unlock()
	if !read {
		h.refresh(cw, false)
	}
	return sub, nil
}

// Chats returns how many chats have subscribers, and how many subscribers
// there are.
func (h *Hub) Chats() (chats, subs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cw := range h.chats {
		cw.mu.Lock()
		subs += len(cw.subs)
		cw.mu.Unlock()
	}
	return len(h.chats), subs
}

func (h *Hub) unsubscribe(sub *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cw := h.chats[sub.Chat]
	if cw == nil {
		return
	}
	cw.mu.Lock()
	delete(cw.subs, sub)
	empty := len(cw.subs) == 0
	cw.mu.Unlock()
	if empty {
		delete(h.chats, sub.Chat)
	}
}

// Sub is one subscriber's view of a chat: the newest snapshot, and a
// channel that has a value whenever a newer one arrived.
type Sub struct {
	Chat string
	// C receives when Latest has a snapshot not taken yet.
	C   chan struct{}
	hub *Hub

	mu    sync.Mutex
	snap  Snapshot
	fresh bool
	once  sync.Once
}

func (s *Sub) put(snap Snapshot) {
	s.mu.Lock()
	s.snap, s.fresh = snap, true
	s.mu.Unlock()
	select {
	case s.C <- struct{}{}:
	default:
	}
}

// Latest returns the newest snapshot, and whether it is one not taken
// before.
func (s *Sub) Latest() (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := s.fresh
	s.fresh = false
	return s.snap, fresh
}

// Close ends the subscription.
func (s *Sub) Close() {
	s.once.Do(func() { s.hub.unsubscribe(s) })
}
