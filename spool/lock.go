package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// LockSpec takes an exclusive flock on <job>.json, which never changes
// while the job lives. The daemon takes it before it starts an attempt and
// hands the descriptor to the job's processes, which inherit it: as long as
// any process of the attempt lives, the lock is held, whatever became of the
// daemon. ok is false when someone holds it.
func (s *Spool) LockSpec(job string) (f *os.File, ok bool, err error) {
	f, _, err = openRegular(s.root, job+ExtSpec, os.O_RDONLY)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", job, err)
	}
	return flockNB(f)
}

// SpecLocked reports whether a process holds <job>.json's lock: some process
// of an attempt of the job still lives on this host.
func (s *Spool) SpecLocked(job string) (bool, error) {
	f, ok, err := s.LockSpec(job)
	if err != nil {
		return false, err
	}
	if ok {
		f.Close()
	}
	return !ok, nil
}

// LockChat takes the exclusive flock of chats/<chat>/lock, which the daemon
// running the chat's current job holds (and the job's processes inherit),
// so that at most one run of a chat runs at a time across processes.
func (s *Spool) LockChat(chat string) (f *os.File, ok bool, err error) {
	if err := CheckChatID(chat); err != nil {
		return nil, false, err
	}
	dir := ChatsDir + "/" + chat
	if err := s.mkdir(ChatsDir); err != nil {
		return nil, false, chatError(chat, "", s.plain(ChatsDir, true, err))
	}
	if err := s.mkdir(dir); err != nil {
		return nil, false, chatError(chat, "", s.plain(dir, true, err))
	}
	name := dir + "/" + LockFile
	f, _, err = openRegular(s.root, name, os.O_RDONLY|os.O_CREATE)
	if errors.Is(err, ErrNotRegular) {
		return nil, false, fmt.Errorf("chat %s: lock %s: %w", chat, s.Path(name), err)
	}
	if err != nil {
		return nil, false, chatError(chat, "lock", s.plain(name, false, err))
	}
	return flockNB(f)
}

func flockNB(f *os.File) (*os.File, bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, true, nil
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, false, nil
	}
	return nil, false, err
}

// lockDir takes an exclusive flock of dir itself (never of a name in it:
// chats/<chat>/lock is the running daemon's) and returns its release. A
// filesystem without flock, or a holder that keeps it past lockWait,
// leaves it unlocked: the lock narrows a race, it is not what makes an
// answer valid.
func lockDir(dir *os.Root) (unlock func()) {
	f, err := openDir(dir, ".")
	if err != nil {
		return func() {}
	}
	if locked, _ := lockBounded(int(f.Fd())); !locked {
		f.Close()
		return func() {}
	}
	return func() { f.Close() }
}

// lockWait bounds how long a writer waits for a flock that anyone able to
// open the file may hold: a job's script opens its own events file
// ($SPOOL_EVENTS) and may flock it, and anyone who can read chats/<chat>/
// may flock that directory. A writer that waited forever would hang
// spoold's run of the job (its relay, its end, its shutdown past the
// grace) or watchd's answer to the chat. Cooperating holders keep these
// locks for the time of one append (milliseconds; an answer's look over
// the largest events file, tens of them); past lockWait the holder is not
// cooperating, and the writer goes on without the lock. A variable for
// tests.
var lockWait = 2 * time.Second

// lockBounded takes an exclusive flock of fd, waiting at most lockWait.
// locked is false, with no error, when another held it all that time: the
// caller goes on unlocked (its line is still one write(2) with O_APPEND;
// what it loses is only the lock's promise, a seq no one else took, or an
// answer written once). Another error of flock is returned.
func lockBounded(fd int) (locked bool, err error) {
	deadline := time.Now().Add(lockWait)
	pause := time.Millisecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return false, err
		case !time.Now().Before(deadline):
			return false, nil
		}
		// A sleep between tries is the wait itself: flock has no timeout.
		time.Sleep(pause)
		if pause < 50*time.Millisecond {
			pause *= 2
		}
	}
}
