// Package ops is what the daemons need to run as services an operator keeps
// for years: telling systemd they are ready, stopping and alive (the
// sd_notify protocol, kept by github.com/coreos/go-systemd), and counting
// what an operator graphs (Prometheus registries, a /metrics handler and a
// node_exporter textfile writer, kept by github.com/prometheus/client_golang).
//
// It knows nothing of the spool tree: the daemons call it at the few points
// that matter (a job ended, a claim was made, the gate decided) and it only
// counts. Every method of the metrics types is safe on a nil receiver, so
// that a daemon built without metrics (a test, a library user) calls them
// unchanged.
//
// What it does not promise: a metric is a count since the process started,
// not a record; the spool tree, not a metric, is the truth about a job.
package ops
