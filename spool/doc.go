// Package spool is the job spool's directory tree: its paths, its ids, its
// documents and the renames that move a job from one state to the next.
//
// Everything a daemon or a shell script needs to agree on lives here, and
// nothing else does: the package runs no job, and keeps nothing between
// calls that the tree does not say (what it holds open, a Watch of a
// directory or a Subdir a daemon works in, is a handle, not a state). Two
// processes that use it, or one that uses it and a person with mv(1),
// coordinate only through the tree.
//
// What it guarantees: a document is never seen half-written (it is written
// to a dot-named temporary in its own directory and renamed over its name);
// the documents that must survive a crash (spec, marker, lease, result) are
// fsync'd, and so is their directory after the rename; a claim is a single
// rename, so of two claimers exactly one wins and the other is told so
// without an error; no path of the tree is followed through a symlink.
//
// What it leaves to its callers: when to claim, when a worker counts as
// dead, how often to heartbeat and flush, and what a job runs.
package spool
