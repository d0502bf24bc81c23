package spool

import (
	"github.com/vmspool/vmspool/internal/atomicfile"
)

// takeSpec writes doc to <id>.json only if nothing stands there, in one
// atomic step (atomicfile's CloseAtomicallyCreate; s.taking says how on
// this filesystem: renameat2 RENAME_NOREPLACE, link(2) where that is
// refused, a check and a rename where both are): of two submitters of
// one id exactly one succeeds, and the other gets an error wrapping
// fs.ErrExist, with nothing left behind. This is what makes a job id a
// job's: a spec is taken, never renamed over another's. opts are
// writeAt's: the spec is fsync'd unless they say NoSync; the directory is
// the caller's to sync.
func (s *Spool) takeSpec(id string, doc []byte, opts []atomicfile.Option) error {
	return writeAt(id+ExtSpec, doc, &s.taking, opts)
}
