package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The doorbell: doorbell/<job>, an empty file whose arrival says "look at
// this job": it was queued (submitted, queued again, given back), claimed
// by a daemon that polls, or asked to cancel. It is a hint and nothing
// more: the root stays the truth (docs/contract.md, "The tree"), a job
// nobody rang for (a hand submission: `mv .$id.ready $id.ready`) is still
// queued, and a bell lost to a crash or a power cut loses nothing but
// time. What it buys is a poll that does not read the root: a daemon that
// polls a shared filesystem stats doorbell/ every poll and reads it (its
// names: the jobs queued and running, and those that just changed) only
// when it moved, where finding a new marker in the root meant listing
// every name of every job kept until gc (docs/spoold.md, "Claiming").
//
// A bell lives while its job does: the end of a job (End) takes it, and
// so does a poller that finds a bell whose job is neither queued nor
// running. Taking it is a rename of the bell to a temporary first, then a
// look at the marker: a job queued again meanwhile keeps its bell, whoever
// rang it and when.

// DoorbellDir is doorbell/.
const DoorbellDir = "doorbell"

// MaxBells is how many bells a poller reads at one look: the bells of jobs
// queued and running, and those that just changed. Past that many, the
// rest wait for a listing of the root.
const MaxBells = 100_000

// Ring rings the doorbell for job: doorbell/<job> is made anew, so that
// doorbell/'s stamp moves even when the bell was there already (a job
// queued again before its bell was taken). A spool without doorbell/
// (made by spool.Create, so by every daemon at start) has no one to ring
// for: Ring does nothing there. A bell is a hint: it is not synced.
func (s *Spool) Ring(job string) error {
	if err := CheckJobID(job); err != nil {
		return err
	}
	return s.ringAll([]string{job})
}

// ringAll rings for each job, opening doorbell/ once.
func (s *Spool) ringAll(jobs []string) error {
	dir, err := s.doorbell()
	if dir == nil {
		return err
	}
	defer dir.Close()
	var errs []error
	for _, job := range jobs {
		if err := ring(int(dir.Fd()), job); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ring makes the bell in the directory dfd (doorbell/): always a new
// file, by the tree's atomic write, so that doorbell/'s names (and with
// them its stamp) change even when a bell was there already.
func ring(dfd int, job string) error {
	if err := writeAdvisory(dfd, job, nil); err != nil {
		return fmt.Errorf("job %s: ringing: %w", job, err)
	}
	return nil
}

// Unring takes the bell of a job that no longer needs one (it ended, or is
// not there): the bell is renamed to a temporary, then the job's marker is
// looked at, and a job queued meanwhile gets its bell back. No bell: nil.
func (s *Spool) Unring(job string) error {
	if err := CheckJobID(job); err != nil {
		return err
	}
	dir, err := s.doorbell()
	if dir == nil {
		return err
	}
	defer dir.Close()
	return s.unring(int(dir.Fd()), job)
}

func (s *Spool) unring(dfd int, job string) error {
	// A temporary's name: never read as anything (docs/contract.md).
	tmp := "." + job + ".taken" + strconv.FormatUint(rand.Uint64(), 10)
	if err := unix.Renameat(dfd, job, dfd, tmp); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return fmt.Errorf("job %s: taking its bell: %w", job, err)
	}
	// Whoever queues a job makes its marker first and rings after: either
	// the marker is seen now, or the ring comes after the rename above
	// and makes a bell of its own.
	if _, err := s.root.Lstat(job + ExtReady); err == nil {
		if err := unix.Renameat(dfd, tmp, dfd, job); err != nil {
			unix.Unlinkat(dfd, tmp, 0)
			return ring(dfd, job)
		}
		return nil
	}
	if err := unix.Unlinkat(dfd, tmp, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("job %s: taking its bell: %w", job, err)
	}
	return nil
}

// doorbell opens doorbell/, never through a symlink, refusing anything but
// a directory there; nil and no error when there is none.
func (s *Spool) doorbell() (*os.File, error) {
	dir, err := openDir(s.root, DoorbellDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", s.Path(DoorbellDir), err)
	}
	return dir, nil
}

// Bells lists the jobs rung for (at most MaxBells), as doorbell/ holds
// them; temporaries and names that are no job id are left out.
func (s *Spool) Bells() ([]string, error) {
	names, err := s.Names(DoorbellDir, MaxBells)
	if err != nil {
		return nil, err
	}
	jobs := names[:0]
	for _, n := range names {
		if ValidID(n) {
			jobs = append(jobs, n)
		}
	}
	return jobs, nil
}

// gcDoorbell takes the bells of jobs neither queued nor running (the ends
// that a crash kept from taking theirs), and removes the temporaries of
// bells older than the cutoff.
func (g *collection) gcDoorbell(jobs map[string]Files) {
	dir, err := g.s.doorbell()
	if dir == nil {
		if err != nil {
			g.errs = append(g.errs, err)
		}
		return
	}
	defer dir.Close()
	names, err := g.s.Names(DoorbellDir, 0)
	if err != nil {
		g.errs = append(g.errs, err)
		return
	}
	for _, n := range names {
		name := DoorbellDir + "/" + n
		if !ValidID(n) {
			if fi, err := g.s.root.Lstat(name); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(g.cutoff) {
				g.remove(name)
			}
			continue
		}
		if jobs[n]&(HasReady|HasRunning) != 0 {
			continue
		}
		if !g.dry {
			if err := g.s.unring(int(dir.Fd()), n); err != nil {
				g.errs = append(g.errs, err)
				continue
			}
		}
		g.report(name)
	}
}
