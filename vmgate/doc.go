// Package vmgate decides, before a script reaches the machine, whether it
// would write to a git repository; it refuses those scripts and lets every
// other one through.
//
// Commits made inside the VM skip what the host-side commit tool does (the
// right author, hardened hooks and filters, scratch left out of what is
// published), so git writes are refused here rather than fought over with
// safe.directory and HOME in the guest. A refusal that catches read-only
// git, or a string that merely mentions git, is as bad as a miss: the
// agent cannot climb that wall. So the gate reads the script the way bash
// would run it (every branch, every substitution, every string that is
// run as code) and names the first git write in run order.
//
// What the gate does NOT promise: it reads shell only. A file the script
// runs (bash ./x.sh, source f, make), another language (python3 -c ...),
// or a repository's own configuration is not seen. Words whose value is
// only known at run time are judged by the rule docs/gate.md calls
// "undecidable". Nothing is ever run or expanded for real: no interp, no
// command substitution, no user look-ups.
//
// Check is pure and safe for concurrent use: the package imports nothing
// that opens a file or starts a process (TestPure), and a rules file
// reaches it as text (ParseRules). Running an allowed script is package
// machine's; the daemon over $SPOOL_DIR/gate/ is package server, which
// reaches the tree only through package spool. A decision's memory is
// bounded by construction (limits.go, budget.go): Check may wait its turn
// while the decisions under way in the process hold their share of one
// pool.
package vmgate
