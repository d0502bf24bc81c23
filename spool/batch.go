package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vmspool/vmspool/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// SubmitBatch queues many jobs at once, with the same promise as Submit
// for each (its spec durable before its marker appears; its chat's
// progress and answer removed before its marker) at a fraction of the
// cost: the specs are written, then made durable together by one
// syncfs(2) of the spool's filesystem, then the chats are cleared and the
// markers created, and one more syncfs makes those durable. A crash leaves
// whole jobs, or specs without markers (which fsck handles), never a
// marker without its spec. It returns the ids, in order.
//
// Every spec is validated, and every id checked free, before anything is
// written: a bad batch queues nothing. Each spec is then taken (take), so
// an id another submitter took since the check stops the batch the same
// way. An I/O error while the specs are written removes them (nothing
// queued); one while the markers are created
// returns the ids queued so far with the error (a queued job cannot be
// taken back: a daemon may have claimed it).
//
// syncfs flushes whatever else waits on that filesystem too; where it is
// refused, each file and the directory are fsync'd instead.
func (s *Spool) SubmitBatch(specs []*Spec) ([]string, error) {
	now := time.Now()
	// The root's own descriptor, which the files are written on by
	// system calls (writeAt: atomicfile's InDir): every name used is a
	// checked id plus a suffix (no "/"), its temporary made O_NOFOLLOW
	// and O_EXCL, so nothing can lead out of the directory, and the Go
	// poller's bookkeeping of an os.File (which os.Root, and renameio's
	// temporary, add to each open) is not paid 20,000 times.
	dfd := s.dirfd()
	docs, err := s.checkBatch(specs, now)
	if err != nil {
		return nil, err
	}
	// Each file is written on the descriptor, not fsync'd (syncAll makes
	// them durable together), with the umask trusted to leave the tree's
	// mode whole when it does (10,000 fchmods fewer in a batch of 5,000).
	opts := treeOpts(dirOwner(dfd), atomicfile.InDir(dfd), atomicfile.NoSync(), atomicfile.TrustUmask())
	undo := func(n int) {
		for _, sp := range specs[:n] {
			unix.Unlinkat(dfd, sp.ID+ExtSpec, 0)
		}
	}
	// Each spec is taken (takeSpec: never over another's), so that of two
	// batches, or a batch and a submit, that name one id, exactly one
	// queues it, whatever the listing checkBatch read said.
	for i, sp := range specs {
		if err := s.takeSpec(sp.ID, docs[i], opts); err != nil {
			undo(i)
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("spec %d: job %s: already exists (%s)", i+1, sp.ID, s.Path(sp.ID+ExtSpec))
			}
			return nil, fmt.Errorf("job %s: writing spec: %w", sp.ID, err)
		}
	}
	if err := s.syncAll(specs, ExtSpec); err != nil {
		undo(len(specs))
		return nil, fmt.Errorf("making the specs durable: %w", err)
	}
	cleared := make(map[string]bool)
	for _, sp := range specs {
		if cleared[sp.Chat] {
			continue
		}
		if err := s.ClearChat(sp.Chat); err != nil {
			undo(len(specs))
			return nil, fmt.Errorf("job %s: %w", sp.ID, err)
		}
		cleared[sp.Chat] = true
	}
	ids := make([]string, 0, len(specs))
	for i, sp := range specs {
		if err := writeAt(sp.ID+ExtReady, nil, nil, opts); err != nil {
			// The specs after this one were never queued: they go.
			for _, rest := range specs[i:] {
				unix.Unlinkat(dfd, rest.ID+ExtSpec, 0)
			}
			s.syncAll(specs[:i], ExtReady)
			s.ringAll(ids)
			return ids, fmt.Errorf("job %s: writing marker: %w", sp.ID, err)
		}
		ids = append(ids, sp.ID)
	}
	if err := s.syncAll(specs, ExtReady); err != nil {
		s.ringAll(ids)
		return ids, fmt.Errorf("making the markers durable: %w", err)
	}
	// After the markers, as a hint to daemons that poll (doorbell.go).
	s.ringAll(ids)
	return ids, nil
}

// checkBatch checks every spec of a batch before anything is written
// (valid, its id fresh, once in the batch, no job of that id in the tree,
// the free-space floor), fills in the ids and stamps left out, and
// returns the documents to write.
func (s *Spool) checkBatch(specs []*Spec, now time.Time) ([][]byte, error) {
	seen := make(map[string]bool, len(specs))
	// The jobs already in the tree, from one listing: six stats per spec
	// cost more than reading the directory once.
	names, err := s.Names(".", 0)
	if err != nil {
		return nil, err
	}
	present := stateNames(names)
	exists := func(n string) bool { _, ok := present[n]; return ok }
	for i, sp := range specs {
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("spec %d: %w", i+1, err)
		}
		if sp.ID == "" {
			sp.ID = NewJobID(now)
		}
		if sp.Created == 0 {
			sp.Created = Stamp(now)
		}
		if seen[sp.ID] {
			return nil, fmt.Errorf("spec %d: job %s: twice in the batch", i+1, sp.ID)
		}
		seen[sp.ID] = true
		if n := takenBy(sp.ID, exists); n != "" {
			return nil, fmt.Errorf("spec %d: job %s: already exists (%s)", i+1, sp.ID, s.Path(n))
		}
	}
	if err := s.Floor.Check(s.RootPath); err != nil {
		return nil, err
	}
	docs := make([][]byte, len(specs))
	for i, sp := range specs {
		b, err := marshalSpec(sp)
		if err != nil {
			return nil, fmt.Errorf("spec %d: %w", i+1, err)
		}
		docs[i] = b
	}
	return docs, nil
}

// syncAll makes the files written so far durable, and their names: one
// syncfs of the spool's filesystem, or, where that is refused, an fsync of
// each <id><ext> and of the root directory.
func (s *Spool) syncAll(specs []*Spec, ext string) error {
	dfd := s.dirfd()
	// syncfs makes the whole filesystem durable where the filesystem
	// implements it. A FUSE filesystem may not (the kernel then returns
	// success having asked its server nothing, and sshfs is such a one):
	// there each file and the directory are synced one by one.
	var st unix.Statfs_t
	if unix.Fstatfs(dfd, &st) == nil && st.Type != unix.FUSE_SUPER_MAGIC {
		if err := unix.Syncfs(dfd); err == nil {
			return nil
		}
	}
	for _, sp := range specs {
		fd, _, err := openRegularAt(dfd, sp.ID+ext, unix.O_RDONLY)
		if err == unix.ENOENT && ext == ExtReady {
			// Claimed already: the marker is a lease now, which its
			// claimer made durable; the rename is the directory's,
			// synced below.
			continue
		}
		if err != nil {
			return err
		}
		err = unix.Fsync(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return unix.Fsync(dfd)
}
