package atomicfile

import "os"

// Option configures NewPendingFile, WriteFile and CreateFile.
type Option func(*config)

type config struct {
	root       *os.Root
	dirfd      int // -1: none given
	perm       os.FileMode
	trustUmask bool
	owner      bool
	uid, gid   int
	noSync     bool
	syncDir    bool
}

// defaultPerm is renameio's: a file nobody else reads, until WithMode.
const defaultPerm os.FileMode = 0o600

// WithRoot writes in root: the name is one name of root's directory, and
// the write is renameio's own (its temporary through root, its fsync, its
// rename), which is why it replaces and syncs only: NoSync and
// CloseAtomicallyCreate need the directory's descriptor (InDir).
func WithRoot(root *os.Root) Option { return func(c *config) { c.root = root } }

// InDir writes in the directory open as dirfd, which the caller holds and
// closes: the name is one name of it (no "/"), and every step is a system
// call on the two descriptors (openat, renameat...), with no os.File.
func InDir(dirfd int) Option { return func(c *config) { c.dirfd = dirfd } }

// WithMode is the file's mode, set through the temporary's descriptor
// whatever the umask (renameio's WithStaticPermissions). The default is
// 0600.
func WithMode(perm os.FileMode) Option { return func(c *config) { c.perm = perm.Perm() } }

// TrustUmask leaves out the fchmod of WithMode when the process's umask,
// read once at its first use, leaves the mode whole: one system call
// fewer a file, for a batch of thousands. A lone write should not use it:
// it pays the fchmod rather than trust a umask its process may have
// changed since.
func TrustUmask() Option { return func(c *config) { c.trustUmask = true } }

// WithOwner gives the file uid and gid (-1 keeps either) through the
// temporary's descriptor, only where they differ from the new file's, so
// that a process that may not chown at all (a sandbox denying it) still
// writes the files that are already its own. A refused chown fails the
// write: a file its readers cannot read is worse than none.
func WithOwner(uid, gid int) Option {
	return func(c *config) { c.owner, c.uid, c.gid = true, uid, gid }
}

// NoSync leaves out the file's fsync: for what a power cut may take back
// (progress, a metrics textfile, an address), or what the caller makes
// durable later with many others at once (a batch, by one syncfs).
func NoSync() Option { return func(c *config) { c.noSync = true } }

// SyncDir fsyncs the directory once the name is in it, so that the
// rename survives a power cut too.
func SyncDir() Option { return func(c *config) { c.syncDir = true } }
