// Package spoold runs a spool's queue: it claims each queued job by a
// rename, runs it in its own process group, follows its events into
// progress/<chat>, heartbeats its lease and writes its result; and it finds
// the jobs of workers that died and queues them again or ends them.
//
// Several daemons, in one process or many, on one host or several sharing
// the tree, may serve one spool: they share nothing but the tree and its
// kernel locks (a flock on chats/<chat>/lock for the chat's one run at a
// time, a flock on <job>.json that every process of an attempt inherits).
//
// What it does NOT promise: a job is run at least once and never twice at
// the same time, not exactly once (a worker that dies after its job's side
// effects and before its result is recovered, and the job runs again, per
// its attempts). Progress documents are advisory and not fsync'd. A job
// process that leaves its process group and closes the inherited lock
// descriptors escapes the daemon's reach. docs/spoold.md has the details.
package spoold
