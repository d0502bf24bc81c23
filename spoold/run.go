package spoold

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// Timing of progress flushes: a burst of events is coalesced into one
// document at most this often, and a running job's document is rewritten
// at least every keepalive even when nothing happens.
const (
	coalesce  = 20 * time.Millisecond
	keepalive = 4 * time.Second
	// progressRate is what writing one chat's progress may cost a second,
	// in bytes, with one largest document's worth of burst: a job whose
	// output makes large documents gets them rewritten less often, never
	// more than this (a document of 10 KiB, 50 times a second, never
	// reaches it).
	progressRate  = 1 << 20
	progressBurst = spool.MaxProgressSize
	// recordPGID is when (at the latest) a job's process group is written
	// into its lease.
	recordPGID = time.Second
)

// why a run is being ended
type ending int

const (
	endNone ending = iota
	endCancel
	endTimeout
	endShutdown
	endLeaseLost
	endLimit
	endFenced // cut off from the spool: ended by the fence (fence.go)
)

// run is one attempt of a job that this daemon claimed.
type run struct {
	d     *Daemon
	job   string
	sp    *spool.Spec
	lease *spool.Lease
	log   *logrus.Entry

	wake       chan struct{} // <job>.events grew
	answerWake chan struct{} // chats/<chat>/ changed
	cancelCh   chan struct{} // closed by requestCancel
	cancelOnce sync.Once

	er        *spool.EventReader
	ap        *spool.EventAppender // spoold's own appends to <job>.events
	p         spool.Progress
	lastFlush time.Time
	budget    budget          // the bytes of progress it may write (progressRate)
	due       time.Time       // a flush the budget put off is due then
	watching  bool            // chats/<chat>/ is watched for an answer
	answered  map[string]bool // question ids answered by an event we appended
	pgid      int
	cg        *jobCgroup // its cgroup, when jobs run in cgroups (cgroup.go)
	procMu    sync.Mutex // pgid and cg, which the fence reads from its goroutine
	out       *output    // the copy of its stdout and stderr to its log (output.go)
	started   time.Time
	reason    ending
	timeout   time.Duration
	use       usage  // what it wrote against its limits (limits.go)
	beat      *beat  // its heartbeat and fence, from the claim (fence.go)
	limitText string // the limit that ended it
	// asked is when its open question was asked (Unix nanoseconds; 0:
	// none is open), for the metrics, which read it from another
	// goroutine.
	asked atomic.Int64
}

func (r *run) requestCancel() { r.cancelOnce.Do(func() { close(r.cancelCh) }) }

func (d *Daemon) addRun(r *run) {
	d.mu.Lock()
	d.runs[r.job] = r
	delete(d.fenced, r.job)
	d.mu.Unlock()
}

func (d *Daemon) removeRun(r *run) {
	d.mu.Lock()
	if d.runs[r.job] == r {
		delete(d.runs, r.job)
		if r.fenced() {
			// In the same step: the recovery of its lease, which may
			// come once the run is gone, knows what ended it.
			d.fenced[r.job] = fencedRun{attempt: r.lease.Attempt, after: r.beat.after}
		}
	}
	if d.chats[r.sp.Chat] == r {
		delete(d.chats, r.sp.Chat)
	}
	d.mu.Unlock()
	if r.watching {
		d.w.Remove(spool.ChatDir(r.sp.Chat))
	}
}

// execute runs one claimed attempt to its end, which end writes (its last
// progress, then its result). chatLock is held, and inherited by the job's
// processes. claimed is when the claim began: the lease is as old as that
// until a heartbeat succeeds.
func (d *Daemon) execute(sp *spool.Spec, l *spool.Lease, prev *spool.Lease, chatLock *os.File, claimed time.Time) {
	r := &run{
		d: d, job: l.Job, sp: sp, lease: l,
		log:  d.log.WithFields(logrus.Fields{"job": l.Job, "chat": sp.Chat, "worker": d.cfg.Worker, "attempt": l.Attempt}),
		wake: make(chan struct{}, 1), answerWake: make(chan struct{}, 1), cancelCh: make(chan struct{}),
		answered: make(map[string]bool), started: time.Now(),
	}
	r.use.lim = d.limitsFor(sp)
	r.er = d.s.NewEventReader(r.job)
	r.ap = d.s.NewEventAppender(r.job)
	defer r.ap.Close()
	r.p = spool.Progress{Job: r.job, Chat: sp.Chat, Started: spool.Stamp(r.started), State: spool.Running,
		Attempt: l.Attempt, Worker: d.cfg.Worker}
	r.log.Info("claimed")
	// Registered before the cancel check, so that a request is either seen
	// by the check or routed here by its event.
	d.addRun(r)
	defer d.removeRun(r)
	d.cfg.Metrics.Started()
	defer d.cfg.Metrics.Stopped()
	// The heartbeat and the fence run beside everything from here on
	// (fence.go): a filesystem that hangs this goroutine must not keep the
	// job running past its lease, nor let it start past it.
	r.beat = r.startBeat(claimed)
	defer r.beat.stop()

	specLock := r.preflight(prev)
	if specLock == nil {
		return
	}
	r.event(spool.Event{Type: spool.EventStart, Text: fmt.Sprintf("attempt %d started by %s", l.Attempt, d.cfg.Worker)})
	r.sync()
	if !r.due.IsZero() {
		r.flush(true) // before the job runs, whatever the budget
	}
	exited, err := r.start(specLock, chatLock)
	if errors.Is(err, errNotStarted) {
		r.log.WithError(err).Warn("not started: writing nothing")
		return
	}
	if err != nil {
		r.end(spool.Failed, nil, err.Error())
		return
	}
	r.log.WithField("pid", r.pgid).Info("started")
	r.loop(exited)
}

// preflight is what is checked before anything of the job runs: a cancel
// asked for, the spec's lock (no attempt before still running), the events
// file, and the gate's verdict on a script. It returns the spec's lock, or
// nil when the attempt has been ended here.
func (r *run) preflight(prev *spool.Lease) *os.File {
	d := r.d
	if _, err := d.s.Stat(r.job + spool.ExtCancel); err == nil {
		r.event(spool.Event{Type: spool.EventWorker, Text: "cancel requested before it started"})
		r.end(spool.Cancelled, nil, "cancelled before it started")
		return nil
	}
	specLock := r.lockSpec(prev)
	if specLock == nil {
		return nil
	}
	// A symlink, FIFO or directory planted at <job>.events would swallow
	// the run's whole history (every append and read refuses it): the job
	// is refused, as one planted at <job>.log is, rather than run unseen.
	if fi, err := d.s.Stat(r.job + spool.ExtEvents); err == nil && !fi.Mode().IsRegular() {
		specLock.Close()
		r.end(spool.Failed, nil, fmt.Sprintf("events %s: not a regular file (%v); nothing ran", d.s.Path(r.job+spool.ExtEvents), fi.Mode().Type()))
		return nil
	}
	if r.sp.Script != nil {
		// The gate decides before anything of the script runs; a refusal
		// is the attempt's whole story: a gate event and the end.
		if v := d.decide(*r.sp.Script, r.sp.Env[CommitToolEnv]); !v.Allowed {
			specLock.Close()
			r.event(spool.Event{Type: spool.EventGate, Text: v.Message})
			r.log.WithField("reason", v.Reason).Warn("gate refused the script")
			r.end(spool.Failed, nil, v.Message)
			return nil
		}
	}
	return specLock
}

// errNotStarted is start's refusal of a run that was fenced or lost its
// lease before its process started: nothing of the job ran, and nothing is
// written for it.
var errNotStarted = errors.New("the lease is lost or the spool does not answer")

// start starts the job's process with its cgroup, its stdout, the two
// locks and, for a script, the pipe bash reads it from; the locks are
// closed here either way (the child holds them). exited receives the
// process's end.
func (r *run) start(specLock, chatLock *os.File) (exited <-chan error, err error) {
	defer specLock.Close()
	cmd, err := r.command()
	if err != nil {
		return nil, err
	}
	if d := r.d; d.cg != nil {
		cg, err := d.cg.make(r.job, d.cfg.KillGrace)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.dir.Fd())
		r.procMu.Lock()
		r.cg = cg
		r.procMu.Unlock()
	}
	stdout, started, err := r.stdout()
	if err != nil {
		r.dropCgroup()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stdout, stdout
	// fd 3 and 4: the spec's and the chat's locks, inherited by every
	// process the job starts, so that the kernel tells for certain whether
	// any of them still lives. fd 5: the script, for bash to read.
	cmd.ExtraFiles = []*os.File{specLock, chatLock}
	var script, scriptW *os.File
	if r.sp.Script != nil {
		if script, scriptW, err = os.Pipe(); err != nil {
			started(false)
			r.dropCgroup()
			return nil, fmt.Errorf("cannot start bash: %v", err)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, script)
	}
	// The last moment the run may give up: the steps above touch the
	// spool and may have hung past the fence (or found the lease lost).
	// Checked again once the process runs: a fence that fired in between
	// found no group to signal.
	if r.stale() {
		if script != nil {
			script.Close()
			scriptW.Close()
		}
		started(false)
		r.dropCgroup()
		return nil, errNotStarted
	}
	err = cmd.Start()
	started(err == nil)
	if script != nil {
		script.Close()
	}
	if err != nil {
		if scriptW != nil {
			scriptW.Close()
		}
		r.dropCgroup()
		return nil, fmt.Errorf("cannot start %q: %v", cmd.Args[0], err)
	}
	if r.cg != nil {
		r.cg.started()
	}
	r.procMu.Lock()
	r.pgid = cmd.Process.Pid
	r.procMu.Unlock()
	if r.fenced() {
		r.signal(syscall.SIGKILL)
	}
	if scriptW != nil {
		go func() {
			scriptW.Write([]byte(*r.sp.Script))
			scriptW.Close()
		}()
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return ch, nil
}

// stdout is what the job's stdout and stderr are: with a cgroup, the
// log's own descriptor (no process of the job outlives the run, and one
// that lives on when spoold dies is not cut off from its output: it ends
// when the next attempt or a recoverer ends it, its TERM trap run); without
// one, the pipe spoold copies into the log (output.go). started(ok) is
// called once the job has started, or failed to.
func (r *run) stdout() (w *os.File, started func(ok bool), err error) {
	if r.cg != nil {
		log, err := r.d.s.OpenLog(r.job)
		if err != nil {
			return nil, nil, err
		}
		return log, func(bool) { log.Close() }, nil
	}
	out, err := r.openOutput()
	if err != nil {
		return nil, nil, err
	}
	return out.wr, func(ok bool) {
		out.started(ok)
		if ok {
			r.out = out
		}
	}, nil
}

// dropCgroup removes the cgroup of a job that did not start.
func (r *run) dropCgroup() {
	if r.cg != nil {
		r.cg.remove()
		r.procMu.Lock()
		r.cg = nil
		r.procMu.Unlock()
	}
}

// stale reports whether the run must not start: fenced, or its lease
// found lost.
func (r *run) stale() bool {
	if r.fenced() {
		return true
	}
	select {
	case <-r.beat.lost:
		return true
	default:
		return false
	}
}

// lockSpec takes the spec's lock for the new attempt. If some process of
// an attempt before still holds it, this waits for it to end, and on this
// host makes it end: two attempts of one job never run at once. It
// returns nil when the job must not run (it was ended, or lost).
func (r *run) lockSpec(prev *spool.Lease) *os.File {
	d := r.d
	hb := time.NewTicker(d.cfg.Lease / 3)
	defer hb.Stop()
	killed, told := false, false
	for {
		if r.fenced() {
			r.log.Warn("fenced while waiting for the spec lock: writing nothing")
			return nil
		}
		f, ok, err := d.s.LockSpec(r.job)
		if err != nil {
			r.end(spool.Failed, nil, fmt.Sprintf("cannot lock the spec: %v", err))
			return nil
		}
		if ok {
			return f
		}
		if prev != nil && prev.Host == d.cfg.Host && !killed {
			killed = true
			r.log.WithField("pgid", prev.PGID).Info("ending the processes left by the attempt before")
			stopBeat := r.beating()
			d.endAttempt(r.job, r.sp.Chat, prev.PGID, d.cfg.KillGrace)
			stopBeat()
			continue
		}
		if !told {
			told = true
			host := "this host"
			if prev != nil && prev.Host != d.cfg.Host {
				host = "host " + prev.Host
			}
			r.log.WithField("old_host", host).Warn("processes of an attempt before still hold the spec lock; waiting for them to end")
		}
		select {
		case <-hb.C:
			if err := d.s.Heartbeat(r.lease); err != nil {
				r.log.WithError(err).Warn("lease lost while waiting: writing nothing")
				return nil
			}
		case <-d.interrupt:
			r.requeue("interrupted by shutdown before it started", r.d.now())
			return nil
		case <-r.cancelCh:
			r.end(spool.Cancelled, nil, "cancelled before it started")
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *Daemon) decide(script, commitTool string) Verdict {
	if d.cfg.Gate == nil {
		return Verdict{Reason: "policy", Message: "spoold has no script gate: scripts are refused. Nothing ran."}
	}
	return d.cfg.Gate(script, commitTool)
}

// loop waits for the job's end, relaying its events, heartbeating its
// lease, and ending it on cancel, timeout, shutdown or a lost lease.
func (r *run) loop(exited <-chan error) {
	d := r.d
	b := r.beat
	// The limits are measured by a goroutine of their own, which a flood
	// of events keeping this loop busy does not delay (limits.go).
	limitHit, stopLimits := r.watchLimits()
	defer stopLimits()
	k := r.newClocks()
	defer k.stopAll()
	cancelC, interrupt, hard := r.cancelCh, d.interrupt, d.hard
	for {
		select {
		case err := <-exited:
			stopLimits()
			r.exitedAfterLimit(err, limitHit)
			return
		case <-r.wake:
			if wait := coalesce - time.Since(r.lastFlush); wait <= 0 {
				r.sync()
			} else if k.flushC == nil {
				k.flush = time.NewTimer(wait)
				k.flushC = k.flush.C
			}
		case <-k.flushC:
			k.flushC = nil
			r.sync()
		case <-k.keep.C:
			r.sync()
		case <-k.poll:
			r.sync()
			if _, err := d.s.Stat(r.job + spool.ExtCancel); err == nil {
				r.requestCancel()
			}
			r.checkAnswer()
		case <-r.answerWake:
			r.checkAnswer()
		case why := <-limitHit:
			limitHit = nil
			r.limitText = why
			r.stop(k, endLimit, why+": ending the job")
		case <-k.record:
			r.lease.PGID = r.pgid
			if err := d.s.UpdateLease(r.lease); err != nil {
				r.stop(k, endLeaseLost, "lease lost: stopping the job, writing nothing")
			}
		case <-b.lost:
			b.lost = nil
			d.cfg.Metrics.LeaseLost()
			r.stop(k, endLeaseLost, "lease lost: stopping the job, writing nothing")
		case why := <-b.fence:
			r.stop(k, endFenced, why)
		case <-cancelC:
			cancelC = nil
			r.stop(k, endCancel, "cancel requested: ending the job")
		case <-k.timeout:
			k.timeout = nil
			r.stop(k, endTimeout, "timed out after "+r.timeout.String()+": ending the job")
		case <-interrupt:
			interrupt = nil
			r.stop(k, endShutdown, "interrupted by shutdown: ending the job")
		case <-hard:
			hard = nil
			r.stop(k, endShutdown, "interrupted by shutdown: ending the job")
			r.signal(syscall.SIGKILL)
		case <-k.killC:
			k.killC = nil
			r.signal(syscall.SIGKILL)
		}
		// keep is reset by every flush; drain a tick it raced with.
		if !r.lastFlush.IsZero() {
			resetTimer(k.keep, keepalive-time.Since(r.lastFlush))
		}
		// A flush the budget put off is made when it allows.
		if !r.due.IsZero() && k.flushC == nil {
			k.flush = time.NewTimer(max(time.Until(r.due), time.Millisecond))
			k.flushC = k.flush.C
		}
	}
}

// clocks are the timers run.loop selects on. A nil channel is one that is
// off or has fired.
type clocks struct {
	keep    *time.Timer      // a progress flush at least this often
	timeout <-chan time.Time // the job's own timeout
	poll    <-chan time.Time // poll mode: look for a cancel and an answer
	record  <-chan time.Time // write the process group into the lease
	flush   *time.Timer      // a coalesced flush due
	flushC  <-chan time.Time
	kill    *time.Timer // SIGKILL after the kill grace
	killC   <-chan time.Time
	stops   []func() bool
}

func (r *run) newClocks() *clocks {
	d := r.d
	k := &clocks{keep: time.NewTimer(keepalive)}
	k.stops = append(k.stops, k.keep.Stop)
	if r.timeout > 0 {
		t := time.NewTimer(r.timeout)
		k.stops, k.timeout = append(k.stops, t.Stop), t.C
	}
	if d.cfg.Poll > 0 {
		t := time.NewTicker(d.cfg.Poll)
		k.stops, k.poll = append(k.stops, func() bool { t.Stop(); return true }), t.C
	}
	// The process group goes into the lease a moment after the start, not
	// at once: a durable write per job is what no-op jobs cost most, most
	// jobs that short are over by then, and a recoverer that finds no
	// pgid finds the processes by the locks they inherited (holders).
	t := time.NewTimer(min(d.cfg.Lease/3, recordPGID))
	k.stops, k.record = append(k.stops, t.Stop), t.C
	return k
}

func (k *clocks) stopAll() {
	for _, s := range k.stops {
		s()
	}
	if k.flush != nil {
		k.flush.Stop()
	}
	if k.kill != nil {
		k.kill.Stop()
	}
}

// stop ends the job's processes (its group, its cgroup): SIGTERM now,
// SIGKILL after the kill grace. The first reason given is the one the job
// ends with; the event and the log line say it once.
func (r *run) stop(k *clocks, why ending, text string) {
	if r.reason == endNone {
		r.reason = why
		if why != endLeaseLost && why != endFenced {
			r.event(spool.Event{Type: spool.EventWorker, Text: text})
		}
		if why != endFenced { // the fence said it already
			r.log.Info(text)
		}
	}
	r.signal(syscall.SIGTERM)
	if k.kill == nil {
		k.kill = time.NewTimer(r.d.cfg.KillGrace)
		k.killC = k.kill.C
	}
}

// exitedAfterLimit handles the exit of the job's process. The limit
// watcher ends the job's group before it says why: the exit may be seen
// first, and the reason must still be the limit's.
func (r *run) exitedAfterLimit(err error, limitHit <-chan string) {
	select {
	case why := <-limitHit:
		if r.reason == endNone {
			r.reason, r.limitText = endLimit, why
			r.event(spool.Event{Type: spool.EventWorker, Text: why + ": ending the job"})
		}
	default:
	}
	r.exited(err)
}

func resetTimer(t *time.Timer, d time.Duration) {
	if d < time.Millisecond {
		d = time.Millisecond
	}
	t.Reset(d)
}

// exited ends the attempt once its main process is gone: what it left (in
// its cgroup, its group, its session, or holding its locks or its output)
// is ended too (the locks it inherited would otherwise keep the chat
// busy, and its output would run on past the run), the copy of its
// output is finished, and then the result and the last progress are
// written.
func (r *run) exited(werr error) {
	if r.fenced() {
		// Cut off: nothing more is written for the job, and nothing of
		// the spool is touched (it may hang); whoever recovers the job
		// once its lease has expired owns it.
		r.signal(syscall.SIGKILL)
		if r.out != nil {
			r.out.stop()
		}
		if cg := r.cg; cg != nil {
			go func() { cg.wait(2 * time.Second); cg.remove() }()
		}
		r.log.Warn("fenced: the job was ended while the spool did not answer; writing nothing")
		return
	}
	d := r.d
	// The run's heartbeat (fence.go) goes on until the loop returns: the
	// lease stays fresh while what the job left is ended.
	a := attempt{job: r.job, chat: r.sp.Chat, pgid: r.pgid, sid: r.pgid, out: r.out, cg: r.cg}
	if r.out != nil && !d.attemptAlive(r.job) {
		// The copy sees the end of the output within moments of the
		// main process's exit, when nothing else holds it: the usual
		// case, which asks nothing of /proc.
		r.out.wait(20 * time.Millisecond)
	}
	if !d.end(a, d.cfg.KillGrace) {
		r.log.Warn("a process of the job left its group and still holds the spec lock")
	}
	r.finishOutput()
	var exit *int
	var ps *os.ProcessState
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		ps = ee.ProcessState
	} else if werr == nil {
		ps = nil
	}
	code := 0
	sig := ""
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
			sig = ws.Signal().String()
		} else {
			code = ps.ExitCode()
		}
	} else if werr != nil {
		code = -1
	}
	exit = &code
	switch r.reason {
	case endLeaseLost:
		r.log.Warn("stopped after losing the lease; the new holder owns the job")
		return
	case endShutdown:
		r.requeue("interrupted by shutdown", r.d.now())
		return
	case endCancel:
		r.end(spool.Cancelled, exit, "cancelled")
		return
	case endTimeout:
		r.end(spool.Failed, exit, "timed out after "+r.timeout.String())
		return
	case endLimit:
		r.end(spool.Failed, exit, r.limitText)
		return
	}
	switch {
	case werr == nil:
		r.end(spool.Done, exit, "")
	case sig != "":
		r.end(spool.Failed, exit, "killed by signal "+sig)
	case ee != nil:
		r.end(spool.Failed, exit, fmt.Sprintf("exit status %d", code))
	default:
		r.end(spool.Failed, nil, werr.Error())
	}
}

// finishOutput waits for the copy of the job's output (a job without a
// cgroup) to end, every writer gone, so that the log is whole before the
// result says the job ended. A writer that outlived all of end has its
// pipe closed under it: it gets EPIPE, and the log nothing more.
func (r *run) finishOutput() {
	o := r.out
	if o == nil || o.wait(2*time.Second) {
		return
	}
	r.log.Warn("a process of the job outlived it and still holds its output: closing the output, the log gets nothing more")
	o.stop()
	if !o.wait(2 * time.Second) {
		r.use.logStuck = true // the copy is stuck writing the log: its counts are not read
	}
}

// event appends one of spoold's own events to the job's events file, which
// is the one history of the job; it reaches the progress by the reader.
func (r *run) event(ev spool.Event) {
	if r.fenced() {
		return // cut off: the job is whoever recovers it's
	}
	ev.Worker = r.d.cfg.Worker
	ev.Attempt = r.lease.Attempt
	if _, err := r.ap.Append(ev); err != nil {
		r.log.WithError(err).Warn("cannot append event")
	}
}

// sync reads the events appended since the last call into the progress,
// and flushes it.
func (r *run) sync() {
	// A flood is read in slices of syncSlice events for at most
	// syncBudget, between which the loop heartbeats and times out the job.
	began := time.Now()
	more, err := r.fold(syncSlice)
	for more && err == nil && time.Since(began) < syncBudget {
		more, err = r.fold(syncSlice)
	}
	if err != nil {
		r.log.WithError(err).Warn("reading events")
	}
	r.noteDropped(time.Now(), false)
	if more {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	r.flush(false)
	r.noteQuestion()
	if r.p.Question != nil && !r.watching {
		r.watchAnswers()
		r.checkAnswer()
	}
}

// noteQuestion publishes when the open question was asked, if one is.
func (r *run) noteQuestion() {
	var asked int64
	if q := r.p.Question; q != nil {
		asked = int64(q.Asked * 1e9)
		if asked <= 0 {
			asked = 1 // an event without a time: still open
		}
	}
	r.asked.Store(asked)
}

// fold reads the events appended since the last call, at most max of them
// (0: all), into the progress, past the job's event rate (admit).
func (r *run) fold(max int) (more bool, err error) {
	now := time.Now()
	n := 0
	add := func(ev spool.Event) {
		// A flood takes seconds to read: the rate's clock moves with it.
		if n++; n%1024 == 0 {
			now = time.Now()
		}
		if !r.admit(ev, now) {
			return
		}
		switch ev.Type {
		case spool.EventQuestion:
			r.d.cfg.Metrics.Asked()
		case spool.EventAnswer:
			// Counted as read, whoever wrote it: the relay or `spool
			// ask` (checkAnswer).
			r.d.cfg.Metrics.Answered()
		}
		if ev.Type == spool.EventStart {
			// A new attempt: a question of the one before is not open.
			r.p.Question = nil
			if !r.p.Done {
				r.p.State = spool.Running
			}
		}
		r.p.Add(ev)
	}
	if max <= 0 {
		return false, r.er.Each(add)
	}
	return r.er.EachN(max, add)
}

// flush writes the progress document, if the chat's budget allows it now
// (or force: the first and the last document of the run); else it is put
// off, and r.due says until when. Every written document is counted
// against the budget, forced ones too.
func (r *run) flush(force bool) {
	if r.fenced() {
		// Cut off: a document written when the spool answers again
		// would stand over the chat's next run's.
		return
	}
	now := time.Now()
	if wait := r.budget.wait(now); wait > 0 && !force {
		r.due = now.Add(wait)
		return
	}
	r.due = time.Time{}
	n, err := r.d.s.WriteProgressN(&r.p)
	if err != nil {
		r.log.WithError(err).Warn("writing progress")
	} else {
		r.d.cfg.Metrics.Flushed()
	}
	r.budget.spend(n, now)
	r.lastFlush = now
}

// watchAnswers watches chats/<chat>/ for answer.json while the run lives
// (the chat's lock file made the directory).
func (r *run) watchAnswers() {
	d := r.d
	r.watching = true
	d.mu.Lock()
	d.chats[r.sp.Chat] = r
	d.mu.Unlock()
	if err := d.w.Add(spool.ChatDir(r.sp.Chat)); err != nil {
		r.watching = false
		r.log.WithError(err).Warn("cannot watch for answers; checking on every flush")
	}
}

// checkAnswer turns an answer.json that answers the open question into an
// answer event. An answer to another question (a stale one, or another
// job's) is left alone. `spool ask` in the job may have taken the same
// answer and appended its event first (it must, for an answer this relay
// misses: the job asked its next question before the file was read);
// AppendAnswer writes the event only where neither has, so a question has
// one answer event whoever wrote it.
func (r *run) checkAnswer() {
	q := r.p.Question
	if q == nil || r.answered[q.ID] {
		return
	}
	a, err := r.d.s.ReadAnswer(r.sp.Chat)
	if err != nil {
		return
	}
	if a.Question != q.ID || (a.Job != "" && a.Job != r.job) {
		r.log.WithFields(logrus.Fields{"question": q.ID, "answered": a.Question}).Debug("ignoring an answer to another question")
		return
	}
	r.answered[q.ID] = true
	ev := spool.Event{Type: spool.EventAnswer, ID: q.ID, Text: a.Answer, Worker: r.d.cfg.Worker, Attempt: r.lease.Attempt}
	if _, _, err := r.d.s.AppendAnswer(r.job, ev); err != nil {
		r.log.WithError(err).Warn("cannot append event")
	}
	r.log.WithField("question", q.ID).Info("answer received")
	r.sync()
}

// end ends the attempt through spool.End, the one way a job ends: the end
// event, the last progress (done), then the result (durable), then the
// lease removed. A run that lost its lease writes nothing.
func (r *run) end(st spool.State, exit *int, errText string) {
	d := r.d
	if r.fenced() {
		r.log.Warn("fenced: the job was ended while the spool did not answer; writing nothing")
		return
	}
	if cur, _, err := d.s.ReadLease(r.job); err != nil || !cur.Same(r.lease) {
		r.log.Warn("lease lost before the end: writing nothing")
		return
	}
	// A job that flooded its events leaves more than a progress document
	// can show: all but the last MiB are counted, not parsed, and noted.
	if n, err := r.er.FastForward(1 << 20); err == nil && n > 0 {
		r.use.dropped += n
	}
	r.noteDropped(time.Now(), true)
	r.fold(0)
	res := &spool.Result{Job: r.job, Chat: r.sp.Chat, State: st, Exit: exit, Started: spool.Stamp(r.started),
		Attempt: r.lease.Attempt, First: r.lease.First, Worker: d.cfg.Worker}
	if errText != "" {
		res.Error = &errText
	}
	res.Limits = r.use.hits()
	e := spool.Ending{Result: res, Lease: r.lease, Worker: d.cfg.Worker, Progress: &r.p,
		Holding: func() bool { return !r.fenced() }}
	// An end that cannot be written (a full disk) is tried again while
	// the lease is kept fresh: given up, the lease would go stale and a
	// recoverer would end the job "worker died", or run it again, though
	// it ran to its end. Each try resumes where the last one stopped.
	for try := 0; ; try++ {
		err := d.s.End(e)
		if err == nil {
			break
		}
		if errors.Is(err, spool.ErrLeaseLost) && r.fenced() {
			// The spool stopped answering for half the lease: the lease
			// records the ending if its first step was made, and whoever
			// recovers the job finishes it.
			r.log.Warn("fenced while the end was written: writing nothing more; the recovery finishes the end")
			return
		}
		if errors.Is(err, spool.ErrLeaseLost) {
			// Taken over while the end was on its way (the filesystem
			// stopped answering), and a result written late taken
			// back: the job is another attempt's now.
			r.log.WithError(err).Warn("lease lost while the end was written: writing nothing more")
			return
		}
		if try == 0 {
			r.log.WithError(err).Error("cannot write the end; trying again while holding the lease")
		}
		select {
		case <-d.interrupt: // the shutdown's grace is over
			r.log.WithError(err).Error("cannot write the end; stopping, recovery will finish it")
			return
		case <-time.After(min(time.Second, d.cfg.Lease/3)):
		}
		if err := d.s.Heartbeat(r.lease); err != nil {
			r.log.WithError(err).Warn("lease lost while the end could not be written: writing nothing")
			return
		}
	}
	d.cfg.Metrics.Flushed()
	d.cfg.Metrics.Ended(string(st), time.Since(r.started))
	l := r.log.WithFields(logrus.Fields{"state": st, "duration": time.Since(r.started).Round(time.Millisecond).String()})
	if exit != nil {
		l = l.WithField("exit", *exit)
	}
	if errText != "" {
		l = l.WithField("error", firstLine(errText))
	}
	l.Info("ended")
}

// requeue puts an interrupted attempt back in the queue if it has attempts
// left (an interruption counts as an attempt), or ends it failed.
func (r *run) requeue(why string, notBefore time.Time) {
	d := r.d
	max := r.sp.MaxTries()
	if r.lease.Tries() >= max {
		r.end(spool.Failed, nil, why)
		return
	}
	text := fmt.Sprintf("%s; queued again (attempt %d of %d)", why, r.lease.Tries()+1, max)
	r.event(spool.Event{Type: spool.EventWorker, Text: text})
	r.fold(0)
	r.p.State, r.p.Question = spool.Queued, nil
	r.flush(true)
	ok, err := d.s.Requeue(r.lease, notBefore)
	if err != nil || !ok {
		r.log.WithError(err).Warn("could not queue the job again; recovery will")
		return
	}
	r.log.Info(text)
}

// beating heartbeats the lease while the run waits on something that may
// outlast a lease (ending a process group takes up to the kill grace and
// then some), so that no recoverer takes a job whose holder is only busy.
func (r *run) beating() (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(r.d.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.d.s.Heartbeat(r.lease)
			}
		}
	}()
	return func() { close(done) }
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
