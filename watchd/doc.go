// Package watchd relays the progress of a chat's run to the person who
// asked for it: it follows progress/<chat> as the daemon running the job
// replaces it, and turns each new event into one status line, a question,
// or the run's end.
//
// It has three parts. A Follower is pure bookkeeping: documents in,
// outputs out, with the two guards of invariant 7 of docs/contract.md (the start
// stamp and the job id) and the seq that makes each event said once, in
// order. A Hub watches the progress/ directory once (spool.Watch: inotify, or a poll
// for shared filesystems) and hands each subscriber the newest document
// of its chat, read once per change however many subscribe. A Watcher
// joins the two for one subscriber, and falls back to the job's result
// file when the chat's document has moved on to another run.
//
// What it does not promise: a subscriber slower than the writer sees the
// newest document, not every one; events that scrolled out of a
// document's 64 in between are said as one "(N earlier events not shown)"
// line, never silently skipped. It never writes to the tree except to
// create an empty progress/ directory it must watch.
package watchd
