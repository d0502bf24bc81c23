package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// GCOptions tunes GC.
type GCOptions struct {
	// Older is the age past which an ended job's files go (default 7 days),
	// judged by its result's mtime.
	Older time.Duration
	// DryRun removes nothing and reports what would go.
	DryRun bool
	// Now is the time of the collection (zero: now).
	Now time.Time
}

// DefaultGCAge is how long `spool gc` keeps an ended job.
const DefaultGCAge = 7 * 24 * time.Hour

// GC removes what ended jobs left, once it is older than opt.Older: the
// spec first (so that a crash half-way leaves a result without a spec,
// which is still an ended job, never a spec alone that looks like a
// submission), then the result, events, log and cancel request. It never
// touches a queued, running or new job, nor a job in two states (fsck's
// business). It then removes progress/<chat> and chats/<chat>/ of chats
// that no live job names, when they too are older than opt.Older and no
// one holds the chat's lock, and takes the bells (doorbell/) of jobs
// neither queued nor running. report is called with each name removed (or,
// with DryRun, that would be).
func (s *Spool) GC(opt GCOptions, report func(name string)) error {
	if opt.Older <= 0 {
		opt.Older = DefaultGCAge
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	jobs, _, err := s.Scan()
	if err != nil {
		return err
	}
	g := &collection{s: s, dry: opt.DryRun, report: report, cutoff: opt.Now.Add(-opt.Older), live: map[string]bool{}}
	for _, job := range SortedIDs(jobs) {
		g.job(job, jobs[job])
	}
	if !g.dry {
		if err := syncDir(s.root); err != nil {
			g.errs = append(g.errs, err)
		}
	}
	g.gcDoorbell(jobs)
	progress, _ := s.readDirNames(ProgressDir)
	for _, chat := range progress {
		if !ValidID(chat) || g.live[chat] {
			continue
		}
		name := ProgressPath(chat)
		if fi, err := s.root.Lstat(name); err == nil && !fi.IsDir() && fi.ModTime().Before(g.cutoff) {
			g.remove(name)
		}
	}
	chats, _ := s.readDirNames(ChatsDir)
	for _, chat := range chats {
		if !ValidID(chat) || g.live[chat] {
			continue
		}
		if err := s.gcChat(chat, g.cutoff, g.dry, report); err != nil {
			g.errs = append(g.errs, err)
		}
	}
	return errors.Join(g.errs...)
}

// collection is one run of GC.
type collection struct {
	s      *Spool
	dry    bool
	report func(name string)
	cutoff time.Time
	live   map[string]bool // chats of live jobs: their progress and answers stay
	errs   []error
}

// remove removes name (or only reports it, dry) and says whether it did.
func (g *collection) remove(name string) bool {
	if !g.dry {
		if err := removeName(g.s.root, name); err != nil {
			g.errs = append(g.errs, err)
			return false
		}
	}
	g.report(name)
	return true
}

// job collects one job's files: all of an ended job whose state is older
// than the cutoff (spec, state, events, log, cancel, in that order,
// stopping at the first that cannot be removed); the leftovers of a
// collection that stopped half-way once all are old; nothing of a live
// job, whose chat it marks live.
func (g *collection) job(job string, f Files) {
	s := g.s
	st, ok := f.State()
	if !ok {
		// Only events, a log or a cancel request: what a collection
		// that stopped half-way left. They go once all are old.
		var names []string
		for _, ext := range []string{ExtEvents, ExtLog, ExtCancel} {
			if f&extBit[ext] != 0 {
				names = append(names, job+ext)
			}
		}
		if s.allOlder(names, g.cutoff) {
			for _, n := range names {
				g.remove(n)
			}
		}
		return
	}
	if !st.Final() {
		// A live job's chat keeps its progress and answer.
		if chat := s.chatOf(job, st); chat != "" {
			g.live[chat] = true
		}
		return
	}
	if f&(HasReady|HasRunning) != 0 || f.States() > 1 {
		return
	}
	fi, err := s.root.Lstat(job + st.Ext())
	if err != nil || fi.ModTime().After(g.cutoff) {
		return
	}
	ok = true
	for _, ext := range []string{ExtSpec, st.Ext(), ExtEvents, ExtLog, ExtCancel} {
		if f&extBit[ext] != 0 && ok {
			ok = g.remove(job + ext)
		}
	}
}

// chatOf returns the chat a live job names, from its lease or its spec.
func (s *Spool) chatOf(job string, st State) string {
	if st == Running {
		if l, _, err := s.ReadLease(job); err == nil && l.Chat != "" {
			return l.Chat
		}
	}
	if sp, err := s.ReadSpec(job); err == nil {
		return sp.Chat
	}
	return ""
}

// gcChat removes chats/<chat>/ when everything in it is older than cutoff
// and its lock is free.
func (s *Spool) gcChat(chat string, cutoff time.Time, dryRun bool, report func(string)) error {
	dir := ChatDir(chat)
	fi, err := s.root.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nil
	}
	names, err := s.readDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		fi, err := s.root.Lstat(dir + "/" + n)
		if err != nil || fi.IsDir() || fi.ModTime().After(cutoff) {
			return nil
		}
	}
	// The daemon running the chat's job holds its lock. A dry run does not
	// create a missing lock (nobody holds what does not exist).
	hasLock := false
	for _, n := range names {
		hasLock = hasLock || n == LockFile
	}
	if hasLock || !dryRun {
		lock, ok, err := s.LockChat(chat)
		if err != nil || !ok {
			return nil
		}
		defer lock.Close()
	}
	if dryRun {
		report(dir)
		return nil
	}
	for _, n := range names {
		if err := removeName(s.root, dir+"/"+n); err != nil {
			return err
		}
	}
	// LockChat created the lock if it was missing.
	if err := removeName(s.root, dir+"/"+LockFile); err != nil {
		return err
	}
	if err := s.root.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("chat %s: %w", chat, err)
	}
	report(dir)
	return nil
}

// allOlder reports whether every name exists and was modified before cutoff.
func (s *Spool) allOlder(names []string, cutoff time.Time) bool {
	for _, n := range names {
		fi, err := s.root.Lstat(n)
		if err != nil || !fi.ModTime().Before(cutoff) {
			return false
		}
	}
	return len(names) > 0
}
