package spoold

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
)

// parkedRetry is how often the chats that jobs wait for are tried again
// without an event.
const parkedRetry = time.Second

// Daemon serves one spool. Build it with New, run it with Run.
type Daemon struct {
	// pending: jobs seen claimed without a lease, when first and last
	// seen so (chatElsewhere).
	pmu     sync.Mutex
	pending map[string][2]time.Time
	// sightings: what this daemon last saw of each lease it judges, and
	// since when (liveness.go).
	smu       sync.Mutex
	sightings map[string]*sighting
	swept     time.Time

	cfg  Config
	s    *spool.Spool
	log  *logrus.Logger
	q    *queue
	w    *spool.Watch // the root, and the chats/<chat>/ of runs with a question
	root string       // the spool's absolute path, handed to jobs
	boot string
	pid  int
	pst  uint64

	mu         sync.Mutex
	runs       map[string]*run      // the jobs this daemon runs, by job
	chats      map[string]*run      // the same, by chat, while a question is open
	running    map[string]struct{}  // every <job>.running seen in the tree
	recovering map[string]struct{}  // jobs being recovered by this daemon
	claiming   map[string]int       // jobs this daemon claims, until that claim's handling ends (claim.go)
	cancelling map[string]struct{}  // queued jobs being ended cancelled
	fenced     map[string]fencedRun // runs of this daemon that its fence ended, by job, until their lease is recovered (recover.go)

	interrupt chan struct{} // closed when the grace is over: runs end their jobs
	hard      chan struct{} // closed on the second signal: at once
	hardOnce  sync.Once
	intOnce   sync.Once
	bg        sync.WaitGroup // recoveries and cancels under way

	devNull   devNull    // every job's stdin (run.go)
	scriptEnv *ScriptEnv // what a script job's spec may set (scriptenv.go)
	cg        *cgroups   // where its jobs' cgroups are made; nil: none (cgroup.go)

	ls listing // when the root is read whole (listing.go)

	sharedOn  atomic.Bool  // another host may use the spool: runs are fenced (sharing.go)
	sharedWhy atomic.Value // why, or why not: a string

	floorMu  sync.Mutex
	floorAt  time.Time // when the free space was last checked (limits.go)
	floorErr error     // non-nil while below the floor
}

// New checks the config and builds a daemon; it touches nothing yet.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(cfg.Spool.RootPath)
	if err != nil {
		return nil, fmt.Errorf("spoold: spool %s: %w", cfg.Spool.RootPath, err)
	}
	d := &Daemon{
		cfg: cfg, s: cfg.Spool, log: cfg.Log, root: root,
		boot: spool.BootID(), pid: os.Getpid(),
		runs: make(map[string]*run), chats: make(map[string]*run),
		running: make(map[string]struct{}), recovering: make(map[string]struct{}), fenced: make(map[string]fencedRun),
		cancelling: make(map[string]struct{}),
		interrupt:  make(chan struct{}), hard: make(chan struct{}),
	}
	d.pst, _ = spool.ProcessStart(d.pid)
	d.decideShared()
	d.q = newQueue(d.now)
	cfg.Metrics.Observe(d.state)
	if d.scriptEnv, err = NewScriptEnv(cfg.ScriptEnv); err != nil {
		return nil, fmt.Errorf("spoold: %w", err)
	}
	return d, nil
}

// state is what the gauges of the queue and the questions say, from the
// queue and the runs this daemon holds: no read of the tree.
func (d *Daemon) state() ops.SpooldState {
	n, at := d.q.oldest()
	s := ops.SpooldState{Queued: n}
	if !at.IsZero() {
		s.OldestQueued = d.now().Sub(at)
	}
	now := time.Now()
	d.mu.Lock()
	for _, r := range d.runs {
		if asked := r.asked.Load(); asked != 0 {
			s.Waiting++
			s.OldestQuestion = max(s.OldestQuestion, now.Sub(time.Unix(0, asked)))
		}
	}
	d.mu.Unlock()
	return s
}

// now is this daemon's clock, the one it compares the tree's times with
// (markers' not-before times) and writes them by: the host's, moved by
// the test-only ClockOffset.
func (d *Daemon) now() time.Time { return time.Now().Add(d.cfg.ClockOffset) }

// StopNow is the second signal: running jobs are ended at once (SIGKILL to
// their groups) and put back in the queue, without waiting for the grace.
func (d *Daemon) StopNow() {
	d.hardOnce.Do(func() { close(d.hard) })
	d.intOnce.Do(func() { close(d.interrupt) })
}

// Run serves the spool until ctx is done, then shuts down as docs/contract.md
// says: it stops claiming, lets running jobs finish for the grace, ends
// those still running and queues them again (or ends them, per their
// attempts), and returns nil. It returns an error only if it cannot start.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.startCgroups(ctx); err != nil {
		return err
	}
	// The watch goes on before the first scan, or a marker created in
	// between would never be seen. With --poll it looks at the root's
	// stamp every poll, and at the doorbell's (doorbell.go); with inotify
	// its safety net is --rescan.
	wcfg := spool.WatchConfig{Poll: d.cfg.Poll, Buffer: 4096, Make: true}
	dirs := []string{""}
	if d.cfg.Poll > 0 {
		dirs = append(dirs, spool.DoorbellDir)
	} else {
		wcfg.Rescan = d.cfg.Rescan
	}
	w, err := d.s.Watch(wcfg, dirs...)
	if err != nil {
		return fmt.Errorf("spoold: %w (or run with --poll)", err)
	}
	d.w = w
	d.log.WithFields(logrus.Fields{"worker": d.cfg.Worker, "spool": d.root, "workers": d.cfg.Workers,
		"lease": d.cfg.Lease.String(), "poll": d.cfg.Poll.String(), "shared": d.shared(), "shared_why": d.sharedWhy.Load()}).Info("serving")

	evCtx, stopEvents := context.WithCancel(context.Background())
	var evDone sync.WaitGroup
	evDone.Add(1)
	go func() { defer evDone.Done(); d.events(evCtx, d.w.C) }()
	d.firstListing()
	d.doorbell()
	d.recoverAll()

	claimCtx, stopClaiming := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	for i := 0; i < d.cfg.Workers; i++ {
		workers.Add(1)
		go func() { defer workers.Done(); d.work(claimCtx) }()
	}
	evDone.Add(1)
	go func() { defer evDone.Done(); d.ticks(evCtx) }()
	if d.cfg.Ready != nil {
		d.cfg.Ready()
	}

	<-ctx.Done()
	d.log.WithFields(logrus.Fields{"worker": d.cfg.Worker, "running": d.runCount(), "grace": d.cfg.Grace.String()}).Info("stopping: no new claims")
	stopClaiming()
	d.q.close()
	allDone := make(chan struct{})
	go func() { workers.Wait(); close(allDone) }()
	grace := time.NewTimer(d.cfg.Grace)
	select {
	case <-allDone:
	case <-grace.C:
		d.log.WithFields(logrus.Fields{"worker": d.cfg.Worker, "running": d.runCount()}).Info("grace over: ending running jobs")
		d.intOnce.Do(func() { close(d.interrupt) })
	case <-d.hard:
	}
	grace.Stop()
	<-allDone
	stopEvents()
	d.w.Close()
	evDone.Wait()
	d.stopListing()
	d.bg.Wait()
	d.log.WithField("worker", d.cfg.Worker).Info("stopped")
	return nil
}

func (d *Daemon) runCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

// work is one worker: it claims the next claimable job and runs it to its
// end, until the queue closes.
func (d *Daemon) work(ctx context.Context) {
	for {
		it := d.q.next(ctx)
		if it == nil {
			return
		}
		d.handle(it)
	}
}

// ticks drives what no event reports: recovery every half lease (a
// heartbeat is dead once seen still for a lease: looked at every half
// lease, a dead worker's job is taken over between one and two leases
// after its last heartbeat), and in poll mode the runs' wake-ups.
func (d *Daemon) ticks(ctx context.Context) {
	rec := time.NewTicker(d.cfg.Lease / 2)
	defer rec.Stop()
	var poll <-chan time.Time
	if d.cfg.Poll > 0 {
		t := time.NewTicker(d.cfg.Poll)
		defer t.Stop()
		poll = t.C
	}
	// A chat's lock can free with no event this daemon hears of: another
	// host's run on NFS, or a dead worker's orphans exiting. Waiting chats
	// are tried again every second (one flock each, no directory read).
	parked := time.NewTicker(parkedRetry)
	defer parked.Stop()
	d.cfg.Metrics.Alive(d.cfg.Host)
	for {
		if d.cfg.Beat != nil {
			d.cfg.Beat()
		}
		select {
		case <-ctx.Done():
			return
		case <-rec.C:
			d.recoverAll()
		case <-poll:
			d.wakeAll()
		case <-parked.C:
			d.cfg.Metrics.Alive(d.cfg.Host)
			if d.q.parkedChats() > 0 {
				d.q.retryAll()
			}
			// The free space is measured even with nothing queued, for
			// the metrics and the log's one line per crossing.
			d.belowFloor()
		}
	}
}

// events takes the watch's changes until ctx is done.
func (d *Daemon) events(ctx context.Context, changes <-chan spool.Change) {
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-changes:
			if !ok {
				return
			}
			d.event(c)
		}
	}
}

// event dispatches one change of the tree by its name; it never reads the
// directory but for a Look of the root.
func (d *Daemon) event(c spool.Change) {
	if c.Dir == spool.DoorbellDir {
		d.doorbell()
		return
	}
	if c.Dir != "" {
		// chats/<chat>/: its answer.json, for a run with an open question.
		chat, ok := strings.CutPrefix(c.Dir, spool.ChatsDir+"/")
		if ok && (c.Op == spool.Look || c.Name == spool.AnswerFile) {
			d.mu.Lock()
			r := d.chats[chat]
			d.mu.Unlock()
			if r != nil {
				poke(r.answerWake)
			}
		}
		return
	}
	if c.Op == spool.Look {
		if c.Err != nil {
			d.log.WithError(c.Err).WithField("worker", d.cfg.Worker).Warn("rescanning the spool")
		}
		// With inotify, a Look is lost events or the safety net, which also
		// retries what failed: the root is listed whatever its stamp. A
		// poll's Look is the root's stamp moving.
		d.lookRoot(c.Err != nil || d.cfg.Poll <= 0)
		return
	}
	job, ext, ok := spool.SplitName(c.Name)
	if !ok {
		return
	}
	has := func(op spool.Op) bool { return c.Op&op != 0 }
	switch ext {
	case spool.ExtReady:
		if has(spool.Created) {
			d.enqueue(job)
		}
	case spool.ExtEvents:
		if has(spool.Written) || has(spool.Created) {
			d.mu.Lock()
			r := d.runs[job]
			d.mu.Unlock()
			if r != nil {
				poke(r.wake)
			}
		}
	case spool.ExtCancel:
		if has(spool.Created) || has(spool.Written) {
			d.cancel(job)
		}
	case spool.ExtRunning:
		d.mu.Lock()
		if has(spool.Created) {
			d.running[job] = struct{}{}
		} else if has(spool.Removed) {
			delete(d.running, job)
		}
		d.mu.Unlock()
	case spool.ExtDone, spool.ExtFailed, spool.ExtCancelled:
		if has(spool.Created) && d.q.parkedChats() > 0 {
			// Another daemon's run ended: its chat may be free for a job
			// that waits for it. The result names the chat.
			st := map[string]spool.State{spool.ExtDone: spool.Done, spool.ExtFailed: spool.Failed, spool.ExtCancelled: spool.Cancelled}[ext]
			if r, err := d.s.ReadResult(job, st); err == nil && spool.ValidID(r.Chat) {
				d.q.retry(r.Chat)
			}
		}
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// enqueue remembers a marker that appeared: one lstat for its time, no
// directory read.
func (d *Daemon) enqueue(job string) {
	if d.q.has(job) {
		return
	}
	fi, err := d.s.Stat(job + spool.ExtReady)
	if err != nil {
		return
	}
	if !fi.Mode().IsRegular() {
		d.quarantine(job+spool.ExtReady, fmt.Sprintf("the marker is %s, not a plain file", fi.Mode().Type()))
		return
	}
	d.q.add(&item{job: job, at: fi.ModTime(), content: fi.Size() > 0})
}

func (d *Daemon) quarantine(name, why string) {
	dst, err := d.s.Quarantine(name, why)
	e := d.log.WithFields(logrus.Fields{"worker": d.cfg.Worker, "name": name, "why": why})
	if err != nil {
		e.WithError(err).Error("cannot move aside")
		return
	}
	e.WithField("to", spool.CorruptDir+"/"+dst).Warn("moved aside")
}

// rescan reads the root's names once (listing.go says when): at start,
// after an overflow, as the safety net, and in poll mode after the root
// moved. It adds the markers not known yet, keeps the
// set of leases current, hands cancel requests on, and retries every chat
// that jobs wait for. It reports whether the root could be read.
func (d *Daemon) rescan() bool {
	jobs, _, err := d.s.Scan()
	if err != nil {
		d.log.WithError(err).WithField("worker", d.cfg.Worker).Error("scanning the spool")
		return false
	}
	const final = spool.HasDone | spool.HasFailed | spool.HasCancelled
	running := make(map[string]struct{})
	for job, f := range jobs {
		if f&spool.HasRunning != 0 {
			// Beside a final document too: a crash between the two leaves
			// both, and recovery removes the lease.
			running[job] = struct{}{}
		}
		if f&final != 0 {
			continue
		}
		if f&spool.HasReady != 0 {
			d.enqueue(job)
		}
		if f&spool.HasCancel != 0 {
			d.cancel(job)
		}
	}
	d.mu.Lock()
	// Added to, never replaced: a lease that appeared after the readdir
	// stays known. A lease gone is dropped when recovery finds it gone.
	for job := range running {
		d.running[job] = struct{}{}
	}
	d.mu.Unlock()
	d.wakeAll()
	return true
}

// wakeAll, in poll mode, wakes every run (nothing else tells them of their
// events and answers), and in either mode tries again every chat that
// jobs wait for.
func (d *Daemon) wakeAll() {
	if d.cfg.Poll > 0 {
		d.mu.Lock()
		var mine []*run
		for _, r := range d.runs {
			mine = append(mine, r)
		}
		d.mu.Unlock()
		for _, r := range mine {
			poke(r.wake)
			poke(r.answerWake)
		}
	}
	d.q.retryAll()
}

// cancel hands a cancel request to the run of the job if this daemon runs
// it; a job that is only queued is claimed and ended cancelled.
func (d *Daemon) cancel(job string) {
	d.mu.Lock()
	r := d.runs[job]
	_, busy := d.cancelling[job]
	if r == nil && !busy {
		if _, err := d.s.Stat(job + spool.ExtReady); err == nil {
			d.cancelling[job] = struct{}{}
			busy = false
		} else {
			busy = true
		}
	}
	d.mu.Unlock()
	if r != nil {
		r.requestCancel()
		return
	}
	if busy {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.cancelQueued(job)
		d.mu.Lock()
		delete(d.cancelling, job)
		d.mu.Unlock()
	}()
}

func (d *Daemon) lease(chat string) spool.Lease {
	return spool.Lease{Worker: d.cfg.Worker, Host: d.cfg.Host, PID: d.pid, PIDStart: d.pst, Boot: d.boot,
		LeaseS: d.cfg.Lease.Seconds(), Chat: chat}
}

// permanent reports whether an error reading a document will not go away by
// trying again: the job must end rather than wait. A spec this daemon may
// not read (root's 0600 hand submission, say) is one: it waited for ever,
// "cannot read spec; will retry".
func permanent(err error) bool {
	return errors.Is(err, spool.ErrCorrupt) || errors.Is(err, spool.ErrNotRegular) ||
		errors.Is(err, spool.ErrTooLarge) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, spool.ErrInvalidID) ||
		errors.Is(err, fs.ErrPermission)
}
