// Package watchd relays the progress of a chat's run to the person who
// asked for it: it follows progress/<chat> as the daemon running the job
// replaces it, and turns each new event into one status line, a question,
// or the run's end.
//
// It has three parts, one job each. A Tally is the bookkeeping: documents
// in, outputs out, with the two guards of invariant 7 of docs/contract.md
// (the start stamp and the job id) and the seq that makes each event said
// once, in order; it does no I/O. A Hub is the one watch of progress/
// (spool.Watch: inotify, or a poll for shared filesystems), fanned out:
// it hands each subscriber the newest document of its chat, read once per
// change however many subscribe. A Follower follows one chat for one
// subscriber: a Hub subscription through its own Tally, and the job's
// result file when the chat's document has moved on to another run.
// Follow (`watchd follow`) and the Server's event streams each run
// Followers.
//
// What it does not promise: a subscriber slower than the writer sees the
// newest document, not every one; events that scrolled out of a
// document's 64 in between are said as one "(N earlier events not shown)"
// line, never silently skipped. It never writes to the tree except to
// create an empty progress/ directory it must watch.
package watchd
