package spoold

import (
	"container/heap"
	"context"
	"sort"
	"sync"
	"time"
)

// item is a queued job as the daemon remembers it: its id, when its marker
// appeared (or, for a job queued again, when it may run), and whether the
// marker holds anything (the lease of a recovered attempt, or a result):
// nothing more, so that 100,000 queued jobs stay small.
type item struct {
	job     string
	at      time.Time
	content bool
	// parked is set on the head of a chat's wait list while it is retried,
	// so that the retry skips the wait list it came from.
	parked bool
	chat   string
	// taken is its place among the jobs next handed out, which settle
	// keeps: workers read specs at their own pace.
	taken uint64
}

func (a *item) before(b *item) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.job < b.job
}

type itemHeap []*item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(*item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// chatWait is the jobs of one chat that wait for the chat's current run to
// end, oldest first. retrying is set while its head is out being retried.
type chatWait struct {
	items    []*item
	retrying bool
}

func (w *chatWait) insert(it *item) {
	i := sort.Search(len(w.items), func(i int) bool { return it.before(w.items[i]) })
	w.items = append(w.items, nil)
	copy(w.items[i+1:], w.items[i:])
	w.items[i] = it
}

// queue holds the jobs this daemon knows to be queued: a heap by marker
// time for those it may claim, and a wait list per busy chat. Every
// operation is O(log n) in the queue's length, so a job costs the same
// whatever the spool holds.
type queue struct {
	mu      sync.Mutex
	h       itemHeap
	known   map[string]struct{} // in the heap, parked, or being claimed
	waits   map[string]*chatWait
	changed chan struct{} // closed and replaced when something may be claimable
	closed  bool
	now     func() time.Time // the clock the items' times are on (markers' mtimes)
	// taken counts the jobs next handed out; unsettled holds those whose
	// worker has not yet told settle whether they go for their chat.
	taken     uint64
	unsettled map[uint64]struct{}
	settled   *sync.Cond // on mu: an item left unsettled
}

func newQueue(now func() time.Time) *queue {
	q := &queue{known: make(map[string]struct{}), waits: make(map[string]*chatWait), changed: make(chan struct{}), now: now,
		unsettled: make(map[uint64]struct{})}
	q.settled = sync.NewCond(&q.mu)
	return q
}

func (q *queue) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// add queues a job unless it is known already (an event and a rescan may
// both report one marker).
func (q *queue) add(it *item) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.known[it.job]; ok {
		return false
	}
	q.known[it.job] = struct{}{}
	heap.Push(&q.h, it)
	q.notifyLocked()
	return true
}

// push puts back a known job (its marker's time moved on).
func (q *queue) push(it *item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	heap.Push(&q.h, it)
	q.notifyLocked()
}

func (q *queue) has(job string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.known[job]
	return ok
}

// forget drops a job claimed (by anyone) or gone.
func (q *queue) forget(job string) {
	q.mu.Lock()
	delete(q.known, job)
	q.mu.Unlock()
}

// next blocks until a job may be claimed (its time has come) and returns
// it, or returns nil when ctx is done or the queue is closed. A marker
// whose time is in the future waits on a timer, never a spin.
func (q *queue) next(ctx context.Context) *item {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil
		}
		var wait time.Duration = -1
		if len(q.h) > 0 {
			top := q.h[0]
			d := top.at.Sub(q.now())
			if d <= 0 {
				heap.Pop(&q.h)
				q.taken++
				top.taken = q.taken
				q.unsettled[top.taken] = struct{}{}
				q.mu.Unlock()
				return top
			}
			wait = d
		}
		ch := q.changed
		q.mu.Unlock()
		var tc <-chan time.Time
		if wait >= 0 {
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			tc = t.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// close wakes every waiting worker and makes next return nil.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.notifyLocked()
	q.mu.Unlock()
}

// park puts a job of a busy chat on the chat's wait list, in order. If the
// job is the head being retried, it goes back to the head.
func (q *queue) park(it *item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waits[it.chat]
	if w == nil {
		w = &chatWait{}
		q.waits[it.chat] = w
	}
	if it.parked {
		w.retrying = false
	}
	it.parked = false
	w.insert(it)
}

// waiting reports whether the chat has a wait list: a job of the chat that
// is not its head must join it rather than take the chat first.
func (q *queue) waiting(chat string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waits[chat] != nil
}

// settle says, once the worker of a job next handed out knows the job's
// chat, whether the job goes for the chat now (true), or must join the
// chat's wait list (false: park it). chat "" is a job that goes for no
// chat (dropped, refused, put back for later). Several workers take jobs
// in order but read their specs at their own pace: so settle first waits
// until every job handed out before this one has settled, and a job that
// goes for its chat becomes the head of the chat's wait list, out being
// tried, so that a later job of the chat queues behind it rather than
// racing it for the chat's lock (a chat's jobs run in the order they were
// queued, docs/spoold.md).
func (q *queue) settle(it *item, chat string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.unsettled[it.taken]; !ok {
		// Not handed out by next (a test's, or settled already).
		return chat != "" && (it.parked || q.waits[chat] == nil)
	}
	if chat != "" {
		for q.before(it.taken) {
			q.settled.Wait()
		}
	}
	delete(q.unsettled, it.taken)
	q.settled.Broadcast()
	switch {
	case chat == "":
		return false
	case it.parked:
		return true // the head, retried
	case q.waits[chat] != nil:
		return false
	}
	q.waits[chat] = &chatWait{retrying: true}
	it.parked = true
	return true
}

// before reports whether a job handed out before the one taken n-th has
// not settled yet.
func (q *queue) before(n uint64) bool {
	for m := range q.unsettled {
		if m < n {
			return true
		}
	}
	return false
}

// retry puts the head of the chat's wait list back into the heap, to be
// tried again (its chat may have freed). It returns whether it did.
func (q *queue) retry(chat string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.retryLocked(chat)
}

func (q *queue) retryLocked(chat string) bool {
	w := q.waits[chat]
	if w == nil || w.retrying {
		return false
	}
	if len(w.items) == 0 {
		delete(q.waits, chat)
		return false
	}
	it := w.items[0]
	w.items[0] = nil
	w.items = w.items[1:]
	// The list stays while its head is out, even empty, so that a job of
	// the chat that comes meanwhile queues behind the head.
	w.retrying = true
	it.parked = true
	heap.Push(&q.h, it)
	q.notifyLocked()
	return true
}

// headDone tells the wait list that its head was dealt with (claimed, or
// lost to another claimer), so that the next may be retried later.
func (q *queue) headDone(chat string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w := q.waits[chat]; w != nil {
		w.retrying = false
		if len(w.items) == 0 {
			delete(q.waits, chat)
		}
	}
}

// retryAll retries the head of every wait list: the safety net, and the
// only way in poll mode to learn that another daemon's run has ended.
func (q *queue) retryAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for chat := range q.waits {
		q.retryLocked(chat)
	}
}

func (q *queue) parkedChats() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waits)
}

// len is the number of jobs known queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.known)
}

// oldest is the number of jobs known queued and the earliest time one
// that waits for a worker became claimable (zero: none does), for the
// metrics: one pass over the heap, made at each write of the metrics
// (every 15 s), not at each claim. A job that waits behind its chat's run
// (on a wait list), or is out with a worker, is counted but not timed: it
// waits for its chat, not for a worker, and a chat's run may rightly last
// an hour.
func (q *queue) oldest() (n int, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.h {
		if at.IsZero() || it.at.Before(at) {
			at = it.at
		}
	}
	return len(q.known), at
}
