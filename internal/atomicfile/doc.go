// Package atomicfile writes a file whole or not at all: the content goes
// into a new temporary beside the file's name, which is then renamed over
// the name (CloseAtomicallyReplace) or moved there only if the name is
// free (CloseAtomicallyCreate). A reader sees the old file or the new
// one, never a part, and never a file without its mode and owner.
//
// It is google/renameio's PendingFile (NewPendingFile, Write,
// CloseAtomicallyReplace, a deferred Cleanup; WriteFile for the common
// case), with the options every atomic write of this project needs, so
// that there is one of them. Where renameio's recipe is the whole job, a
// durable replace through an os.Root (WithRoot), renameio does it. What
// renameio cannot do, this package does with the same steps on a
// directory's descriptor (InDir, or the directory of a path): leave the
// fsync out (NoSync: progress, a metrics textfile, the files of a batch
// made durable by one syncfs), refuse to replace what stands at the name
// (CloseAtomicallyCreate: a job id is taken so), and write ten thousand
// files without an os.File each (renameio's os.File costs the Go poller's
// bookkeeping at each open and close).
//
// Every temporary is new: a dot, the name and random digits, created with
// O_CREAT|O_EXCL|O_NOFOLLOW through the directory handle, so that it is
// never a link nor an existing file, and nothing planted in the directory
// by its other writers can take the write elsewhere. Its mode and owner
// are set through its descriptor, never by name.
//
// What it does not promise: durability without SyncDir (the file's fsync,
// the default, makes the content durable; the name is durable once the
// directory is synced, which SyncDir does and NoSync does not forbid a
// caller to do later for many files at once); atomicity across
// directories; anything about the directory handle itself, which the
// caller opens (without following a link, where that matters).
package atomicfile
