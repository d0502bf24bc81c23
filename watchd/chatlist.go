package watchd

import (
	"sort"
	"sync"

	"github.com/vmspool/vmspool/spool"
)

// MaxChatsScanned bounds the names of progress/ one listing (GET /chats)
// looks at: a listing costs a stat of each, and a bounded read of those
// that changed since the last.
const MaxChatsScanned = 20000

// chatList is what GET /chats knows of each chat: the head of its
// document (spool.ProgressHead: at most spool.ProgressHeadMax bytes, read
// once per version of the document, told by its stamp). So a listing
// costs a stat a chat and one bounded read of each document written since
// the last listing, whatever the documents hold: with 1,000 documents of
// 250 KB, a listing read them whole (3 s of CPU, and the page lists every
// 3 s); now it reads what changed, 64 KB at most of each.
type chatList struct {
	mu    sync.Mutex // one listing at a time: the index is theirs
	index map[string]chatEntry
	reads int // heads read, for tests
}

type chatEntry struct {
	stamp spool.FileStamp
	info  ChatInfo
}

// list returns the chats to show, newest first: every chat waiting for a
// person's answer, and the newest others up to max in all.
func (l *chatList) list(s *spool.Spool, max int) ([]ChatInfo, error) {
	names, err := s.Names(spool.ProgressDir, MaxChatsScanned)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.index == nil {
		l.index = map[string]chatEntry{}
	}
	seen := make(map[string]bool, len(names))
	all := make([]ChatInfo, 0, len(names))
	for _, n := range names {
		if !spool.ValidID(n) {
			continue
		}
		st, err := s.ProgressStamp(n)
		if err != nil {
			continue
		}
		e, ok := l.index[n]
		if !ok || e.stamp != st {
			head, hst, err := s.ProgressHead(n)
			if err != nil {
				continue
			}
			l.reads++
			e = chatEntry{stamp: hst, info: ChatInfo{Chat: n, Job: head.Job, State: head.State, Status: head.Status, Updated: head.Updated, Done: head.Done}}
			l.index[n] = e
		}
		seen[n] = true
		all = append(all, e.info)
	}
	for n := range l.index {
		if !seen[n] {
			delete(l.index, n)
		}
	}
	return pickChats(all, max), nil
}

// pickChats keeps every chat waiting for an answer and the newest others,
// up to max in all (the waiting ones are kept beyond it), newest first.
func pickChats(all []ChatInfo, max int) []ChatInfo {
	sort.Slice(all, func(i, j int) bool { return all[i].Updated > all[j].Updated })
	out := make([]ChatInfo, 0, min(len(all), max))
	waiting := 0
	for _, c := range all {
		if waitingFor(c) {
			waiting++
		}
	}
	room := max - waiting
	for _, c := range all {
		switch {
		case waitingFor(c):
			out = append(out, c)
		case room > 0:
			out = append(out, c)
			room--
		}
	}
	return out
}

// waitingFor reports whether a chat's run waits for a person's answer.
func waitingFor(c ChatInfo) bool { return c.State == spool.Waiting && !c.Done }
