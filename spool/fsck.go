package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// The kinds of finding of Fsck.
const (
	FindMarkerWithoutSpec = "marker-without-spec"
	FindTwoStates         = "two-states"
	FindDeadLease         = "dead-lease"
	FindOldTemporary      = "old-temporary"
	FindCorrupt           = "corrupt"
	FindAbandonedSpec     = "abandoned-spec"
)

// Finding is one thing of the tree that breaks docs/contract.md, and what Fsck did
// about it when asked to fix.
type Finding struct {
	Kind string `json:"kind"`
	Job  string `json:"job,omitempty"`
	// Name is the name of the tree concerned (root-relative).
	Name string `json:"name"`
	// Text says what is wrong, in one line.
	Text string `json:"text"`
	// Fix says what was done (with FsckOptions.Fix), or "" if nothing.
	Fix string `json:"fix,omitempty"`
	// Err is why the fix failed, or "".
	Err string `json:"error,omitempty"`
}

// Fixed reports whether the finding was repaired.
func (f *Finding) Fixed() bool { return f.Fix != "" && f.Err == "" }

func (f Finding) String() string {
	s := f.Kind + ": " + f.Name + ": " + f.Text
	switch {
	case f.Err != "":
		s += " (fix failed: " + f.Err + ")"
	case f.Fix != "":
		s += " (fixed: " + f.Fix + ")"
	}
	return s
}

// FsckOptions tunes Fsck. The zero value reports only, with the defaults.
type FsckOptions struct {
	Fix bool
	// Now is the time of the check (zero: now).
	Now time.Time
	// Host and Boot identify this host, to judge leases by their pid
	// (empty: os.Hostname and BootID).
	Host, Boot string
	// TempAge is the age past which a temporary is abandoned (default 1h).
	TempAge time.Duration
	// Grace is the age past which a spec with no marker is an abandoned
	// submission (default 1h), and DeadClaim the age past which an empty
	// or unparsable lease is a claimer that died (default 1m).
	Grace, DeadClaim time.Duration
	// Lease is the longest lease believed (default DefaultLease): a
	// lease's own lease_s counts up to it and no further, and a lease
	// that records none (or no positive one) counts as it, as spoold
	// bounds lease_s by its --lease. Give it the --lease spoold runs with:
	// a lease is a document anyone who can write the spool can plant, and
	// one with a lease_s of 10^9 s would otherwise never be judged dead.
	Lease time.Duration
}

// DefaultLease is spoold's lease when none is given (its --lease), and
// the longest lease fsck believes unless told otherwise.
const DefaultLease = 30 * time.Second

// fsckWorker is the worker fsck ends jobs as, in their end events and
// the lease it claims a job with.
const fsckWorker = "fsck"

// lease is the lease fsck claims a job with, to end it: this process,
// judged as any worker's lease is.
func (o *FsckOptions) lease(chat string) Lease {
	pid := os.Getpid()
	pst, _ := ProcessStart(pid)
	return Lease{Worker: fsckWorker, Host: o.Host, PID: pid, PIDStart: pst, Boot: o.Boot, LeaseS: o.Lease.Seconds(), Chat: chat}
}

func (o *FsckOptions) defaults() {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.Boot == "" {
		o.Boot = BootID()
	}
	if o.TempAge <= 0 {
		o.TempAge = time.Hour
	}
	if o.Grace <= 0 {
		o.Grace = time.Hour
	}
	if o.DeadClaim <= 0 {
		o.DeadClaim = time.Minute
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
}

// Fsck checks the tree against the invariants of docs/contract.md and returns one
// finding per thing wrong; with opt.Fix it also repairs each, the way
// docs/spool-format.md says:
//
//   - a marker or lease without a spec: the marker goes to corrupt/;
//   - a job in two states at once: a final document wins and the
//     .running or .ready beside it is removed; .ready beside .running
//     leaves .running; a second final document goes to corrupt/;
//   - a lease whose worker is dead (its own host: the pid is gone or
//     reused and no process holds the spec's lock, whatever the
//     heartbeat's age; another host: the heartbeat is older than lease_s,
//     believed up to Lease): its end finished if it
//     records one, else queued again while attempts remain, else
//     ended failed "worker W died", the rule spoold follows;
//   - a temporary (a dot name) older than TempAge: removed;
//   - a document that does not parse: moved to corrupt/ with a .why; a
//     queued or new job whose spec that was is ended failed, and an
//     unreadable result is replaced by a failed one that says so;
//   - a spec alone (no marker, no result) older than Grace, an abandoned
//     hand submission: moved to corrupt/, never run unasked.
//
// Fsck watches nothing and keeps nothing; a daemon may call it.
func (s *Spool) Fsck(opt FsckOptions) ([]Finding, error) {
	opt.defaults()
	jobs, other, err := s.Scan()
	if err != nil {
		return nil, err
	}
	var out []Finding
	add := func(f Finding, fix func() (string, error)) {
		if opt.Fix && fix != nil {
			what, err := fix()
			f.Fix = what
			if err != nil {
				f.Err = err.Error()
				if f.Fix == "" {
					f.Fix = "attempted"
				}
			}
		}
		out = append(out, f)
	}
	out = append(out, s.fsckTemporaries(".", other, opt)...)
	for _, job := range SortedIDs(jobs) {
		s.fsckJob(job, jobs[job], opt, add)
	}
	out = append(out, s.fsckChats(opt, jobs)...)
	return out, nil
}

// fsckTemporaries reports (and removes) the dot names of dir older than
// TempAge. dir is "." or a subdirectory of the tree.
func (s *Spool) fsckTemporaries(dir string, names []string, opt FsckOptions) []Finding {
	var out []Finding
	for _, n := range names {
		if !strings.HasPrefix(n, ".") {
			continue
		}
		name := n
		if dir != "." {
			name = dir + "/" + n
		}
		fi, err := s.root.Lstat(name)
		if err != nil || fi.IsDir() {
			continue
		}
		age := opt.Now.Sub(fi.ModTime())
		if age < opt.TempAge {
			continue
		}
		f := Finding{Kind: FindOldTemporary, Name: name, Text: fmt.Sprintf("temporary left for %s", age.Round(time.Second))}
		if opt.Fix {
			if err := removeName(s.root, name); err != nil {
				f.Fix, f.Err = "remove", err.Error()
			} else {
				f.Fix = "removed"
			}
		}
		out = append(out, f)
	}
	return out
}

func (s *Spool) fsckJob(job string, f Files, opt FsckOptions, add func(Finding, func() (string, error))) {
	st, ok := f.State()
	if !ok {
		return
	}
	// A marker or lease whose spec is gone: nothing can run it.
	if f&HasSpec == 0 && !st.Final() {
		name := job + st.Ext()
		add(Finding{Kind: FindMarkerWithoutSpec, Job: job, Name: name, Text: "the job has no spec " + job + ExtSpec},
			func() (string, error) {
				dst, err := s.Quarantine(name, "fsck: "+string(st)+" marker without a spec")
				return "moved to " + CorruptDir + "/" + dst, err
			})
		return
	}
	if f.States() > 1 {
		s.fsckTwoStates(job, f, st, add)
	}
	if f&HasSpec != 0 {
		if _, err := s.ReadSpec(job); err != nil && !errors.Is(err, fs.ErrNotExist) {
			name := job + ExtSpec
			add(Finding{Kind: FindCorrupt, Job: job, Name: name, Text: oneLine(err)}, func() (string, error) {
				if st == Running {
					return "", errors.New("the job is running: left to its worker")
				}
				// A queued job is claimed first, as spoold claims one it
				// refuses: the claim's rename decides who ends it.
				chat := s.LooseChat(job)
				var l *Lease
				if st == Queued {
					var cerr error
					if l, _, cerr = s.Claim(job, opt.lease(chat)); cerr != nil {
						return "", cerr
					} else if l == nil {
						return "", errors.New("taken over meanwhile")
					}
				}
				dst, err := s.Quarantine(name, "fsck: "+oneLine(err))
				if err != nil {
					return "", err
				}
				what := "moved to " + CorruptDir + "/" + dst
				if st == Queued || st == New {
					r := &Result{Job: job, Chat: chat, State: Failed, Worker: fsckWorker}
					if l != nil {
						r.Attempt, r.First, r.Started = l.Attempt, l.First, l.Claimed
					}
					r.Errorf("spec does not parse (moved to %s/%s)", CorruptDir, dst)
					if err := s.End(Ending{Result: r, Lease: l, Worker: fsckWorker}); err != nil {
						return what, err
					}
					what += "; job ended failed"
				}
				return what, nil
			})
			return
		}
	}
	switch {
	case st.Final():
		if _, err := s.ReadResult(job, st); err != nil && !errors.Is(err, fs.ErrNotExist) {
			name := job + st.Ext()
			add(Finding{Kind: FindCorrupt, Job: job, Name: name, Text: oneLine(err)}, func() (string, error) {
				dst, err := s.Quarantine(name, "fsck: "+oneLine(err))
				if err != nil {
					return "", err
				}
				r := &Result{Job: job, State: Failed}
				r.Errorf("result does not parse (moved to %s/%s)", CorruptDir, dst)
				if sp, err := s.ReadSpec(job); err == nil {
					r.Chat = sp.Chat
				}
				// A repair, not an end: the job's end event was written
				// when it ended, and its lease is long gone.
				return "moved to " + CorruptDir + "/" + dst + "; replaced by a failed result", s.writeResult(r)
			})
		}
	case st == Running:
		s.fsckLease(job, opt, add)
	case st == New:
		fi, err := s.root.Lstat(job + ExtSpec)
		if err != nil {
			return
		}
		if age := opt.Now.Sub(fi.ModTime()); age > opt.Grace {
			name := job + ExtSpec
			add(Finding{Kind: FindAbandonedSpec, Job: job, Name: name,
				Text: fmt.Sprintf("spec without marker or result for %s: an abandoned submission", age.Round(time.Second))},
				func() (string, error) {
					dst, err := s.Quarantine(name, "fsck: spec without a marker for over "+opt.Grace.String()+
						" (an abandoned submission); to run it, move it back and create "+job+ExtReady)
					return "moved to " + CorruptDir + "/" + dst, err
				})
		}
	}
}

func (s *Spool) fsckTwoStates(job string, f Files, st State, add func(Finding, func() (string, error))) {
	var names []string
	for _, x := range []State{Done, Failed, Cancelled, Running, Queued} {
		if f&stateBit(x) != 0 {
			names = append(names, job+x.Ext())
		}
	}
	add(Finding{Kind: FindTwoStates, Job: job, Name: job + st.Ext(), Text: "the job is in more than one state: " + strings.Join(names, ", ")},
		func() (string, error) {
			var done []string
			for _, x := range []State{Done, Failed, Cancelled, Running, Queued} {
				if x == st || f&stateBit(x) == 0 {
					continue
				}
				name := job + x.Ext()
				if x.Final() {
					dst, err := s.Quarantine(name, "fsck: a second final document beside "+job+st.Ext())
					if err != nil {
						return strings.Join(done, "; "), err
					}
					done = append(done, "moved "+name+" to "+CorruptDir+"/"+dst)
					continue
				}
				if err := removeName(s.root, name); err != nil {
					return strings.Join(done, "; "), err
				}
				done = append(done, "removed "+name)
			}
			return "kept " + job + st.Ext() + "; " + strings.Join(done, "; "), syncDir(s.root)
		})
}

func stateBit(st State) Files {
	return extBit[st.Ext()]
}

func (s *Spool) fsckLease(job string, opt FsckOptions, add func(Finding, func() (string, error))) {
	name := job + ExtRunning
	l, fi, err := s.ReadLease(job)
	if err != nil {
		if fi == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if !errors.Is(err, ErrCorrupt) {
			add(Finding{Kind: FindCorrupt, Job: job, Name: name, Text: oneLine(err)}, nil)
			return
		}
		// An empty lease is a claim under way for a moment; past that, a
		// claimer that died between its rename and its write.
		if age := opt.Now.Sub(fi.ModTime()); age > opt.DeadClaim {
			add(Finding{Kind: FindDeadLease, Job: job, Name: name, Text: fmt.Sprintf("lease unreadable for %s: a claimer that died", age.Round(time.Second))},
				func() (string, error) {
					ok, err := s.Requeue(&Lease{Job: job}, opt.Now)
					if err == nil && !ok {
						return "", errors.New("taken over meanwhile")
					}
					return "queued again", err
				})
		}
		return
	}
	why := ""
	// On the lease's own host its process decides, whatever the
	// heartbeat's age: a paused worker is alive (ByProcess).
	decides, alive := l.ByProcess(opt.Host, opt.Boot)
	beat := opt.Now.Sub(fi.ModTime())
	ls := opt.Lease
	if l.LeaseS > 0 && l.LeaseS < opt.Lease.Seconds() {
		ls = l.Duration()
	}
	switch {
	case decides && !alive:
		// The worker is gone; its job's processes hold the spec's lock
		// for as long as any of them lives.
		if locked, err := s.SpecLocked(job); err == nil && !locked {
			why = fmt.Sprintf("worker %s (pid %d on %s) is gone", l.Worker, l.PID, l.Host)
		}
	case !decides && beat > ls:
		why = fmt.Sprintf("worker %s on %s has not beaten for %s (lease %s)", l.Worker, l.Host, beat.Round(time.Second), ls)
	}
	if why == "" {
		return
	}
	add(Finding{Kind: FindDeadLease, Job: job, Name: name, Text: why}, func() (string, error) {
		if r := l.Ending; r != nil {
			// Its worker died while it ended the job: the end is
			// finished as it was begun.
			return "finished its end: " + string(r.State), s.End(Ending{Result: r, Lease: l, Worker: fsckWorker})
		}
		max, chat := 1, l.Chat
		if sp, err := s.ReadSpec(job); err == nil {
			max, chat = sp.MaxTries(), sp.Chat
		}
		if l.Tries() < max {
			ok, err := s.Requeue(l, opt.Now)
			if err == nil && !ok {
				return "", errors.New("taken over meanwhile")
			}
			return fmt.Sprintf("queued again (attempt %d of %d used)", l.Tries(), max), err
		}
		r := &Result{Job: job, Chat: chat, State: Failed, Started: l.Claimed, Attempt: l.Attempt, First: l.First, Worker: l.Worker}
		r.Errorf("worker %s died", l.Worker)
		return "ended failed: worker " + l.Worker + " died", s.End(Ending{Result: r, Lease: l, Worker: fsckWorker})
	})
}

// fsckChats checks progress/ and chats/*/: documents that do not parse,
// and temporaries left behind.
func (s *Spool) fsckChats(opt FsckOptions, jobs map[string]Files) []Finding {
	var out []Finding
	quarantine := func(name string, err error) {
		f := Finding{Kind: FindCorrupt, Name: name, Text: oneLine(err)}
		if opt.Fix {
			dst, qerr := s.Quarantine(name, "fsck: "+oneLine(err))
			f.Fix = "moved to " + CorruptDir + "/" + dst
			if qerr != nil {
				f.Err = qerr.Error()
			}
		}
		out = append(out, f)
	}
	names, _ := s.readDirNames(ProgressDir)
	out = append(out, s.fsckTemporaries(ProgressDir, names, opt)...)
	for _, chat := range names {
		if !ValidID(chat) {
			continue
		}
		if _, err := s.ReadProgress(chat); err != nil && !errors.Is(err, fs.ErrNotExist) {
			quarantine(ProgressPath(chat), err)
		}
	}
	chats, _ := s.readDirNames(ChatsDir)
	for _, chat := range chats {
		if !ValidID(chat) {
			continue
		}
		inside, _ := s.readDirNames(ChatDir(chat))
		out = append(out, s.fsckTemporaries(ChatDir(chat), inside, opt)...)
		if _, err := s.ReadAnswer(chat); err != nil && !errors.Is(err, fs.ErrNotExist) {
			quarantine(ChatDir(chat)+"/"+AnswerFile, err)
		}
	}
	return out
}

// readDirNames lists a subdirectory of the tree (nothing if it is missing
// or not a directory), as Names does.
func (s *Spool) readDirNames(dir string) ([]string, error) {
	names, err := s.Names(dir, 0)
	if errors.Is(err, ErrNotRegular) {
		return nil, nil
	}
	return names, err
}

// oneLine is err's message on one line, for a finding or a .why.
func oneLine(err error) string { return flat(err.Error()) }
