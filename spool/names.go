package spool

import (
	"slices"
	"strings"
)

// The suffixes of a job's names in the root of the tree.
const (
	ExtSpec      = ".json"
	ExtReady     = ".ready"
	ExtRunning   = ".running"
	ExtDone      = ".done"
	ExtFailed    = ".failed"
	ExtCancelled = ".cancelled"
	ExtCancel    = ".cancel"
	ExtEvents    = ".events"
	ExtLog       = ".log"
)

// stateExts are the names whose existence is a job's state: an id that has
// any of them is taken (takenBy).
var stateExts = []string{ExtSpec, ExtReady, ExtRunning, ExtDone, ExtFailed, ExtCancelled}

// takenBy is the one rule of "is this id taken", which Submit, SubmitBatch
// and the Python client follow: an id is taken while any of its state
// names (spec, marker, lease, result) exists. It returns that name, or "".
// exists says whether a name of the root exists.
func takenBy(id string, exists func(name string) bool) string {
	for _, ext := range stateExts {
		if exists(id + ext) {
			return id + ext
		}
	}
	return ""
}

// stateNames keeps, of a listing of the root, the names takenBy asks
// about: those SplitName reads as an id and a state suffix. A job id may
// hold dots, so a name is split at its last dot (nightly.1.json is job
// nightly.1), never its first.
func stateNames(names []string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		if _, ext, ok := SplitName(n); ok && slices.Contains(stateExts, ext) {
			m[n] = struct{}{}
		}
	}
	return m
}

var exts = append(slices.Clip(stateExts), ExtCancel, ExtEvents, ExtLog)

// SplitName splits a name of the root into a job id and one of the Ext*
// suffixes. Temporaries (a leading dot), directories of the tree and names
// with an unknown suffix or an invalid id give ok == false.
func SplitName(name string) (job, ext string, ok bool) {
	if name == "" || name[0] == '.' {
		return "", "", false
	}
	// Every suffix is the name's last dot and what follows.
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return "", "", false
	}
	e, ok := extOf[name[i:]]
	if !ok || !ValidID(name[:i]) {
		return "", "", false
	}
	return name[:i], e, true
}

var extOf = func() map[string]string {
	m := make(map[string]string, len(exts))
	for _, e := range exts {
		m[e] = e
	}
	return m
}()
