package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
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
// filesystem without flock leaves it unlocked: the lock narrows a race,
// it is not what makes an answer valid.
func lockDir(dir *os.Root) (unlock func()) {
	f, err := openDir(dir, ".")
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() }
}
