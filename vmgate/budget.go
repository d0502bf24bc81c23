package vmgate

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// A decision's budgets. The scan before the parse bounds the tree
// (limits.go); these bound the walk over it, which reads function bodies
// at each call, loop bodies once a word and strings run as code once
// parsed, and makes words, variables and files as it goes. Every node the
// walk visits is counted against maxWork, every byte it makes against
// maxMemory, and how deep statements nest (calls included) against
// maxLevel. A budget that runs out ends the decision undecidable (refused,
// never allowed), and the refusal says which one ran out.
const (
	// maxWork bounds the nodes a walk visits: a statement, a command, a
	// word's part, an operator. A script at MaxNodes can be read about
	// four times over.
	maxWork = 1_000_000
	// maxMemory bounds the bytes a walk makes beyond what its tree takes
	// (a walk makes about a word a node): expanded words, variables and
	// the copies branches make of them, files the script writes, output
	// the gate follows, and strings run as code with their trees.
	maxMemory = 16 << 20
	// maxLevel bounds how deep statements nest, function calls and strings
	// run as code included: the walk's own stack.
	maxLevel = 1000
	// maxDepth bounds how deep strings run as code nest (bash -c 'bash -c
	// ...'), each parsed again.
	maxDepth = 8
)

// fieldBytes is what the gate counts for one word or variable it keeps,
// besides its text: the struct, the slot in a slice or a map.
const fieldBytes = 128

// tick counts n nodes visited; false once the work budget ran out.
func (w *walker) tick(n int) bool {
	w.work += n
	if w.work > maxWork {
		w.exhausted(fmt.Sprintf("reading it visits more than %d nodes: the gate's work budget ran out", maxWork))
		return false
	}
	return !w.done
}

// charge counts n bytes made; false once the memory budget ran out.
func (w *walker) charge(n int) bool {
	w.mem += n
	if w.mem > w.memLimit {
		w.exhausted(fmt.Sprintf("reading it makes more than %d MiB of words and values: the gate's memory budget ran out", w.memLimit>>20))
		return false
	}
	return !w.done
}

// exhausted ends the walk: a budget ran out. What was found before stands
// (a git write is still named over the doubt).
func (w *walker) exhausted(why string) {
	if w.done {
		return
	}
	line, col, text := w.where(w.cur)
	w.record(&finding{reason: ReasonUndecidable, line: line, col: col, text: text, why: why, fatal: true})
	w.done = true
}

// inFlight bounds the memory of the decisions a process makes at once:
// each reserves, before its parse, all that it may take (its text twice,
// its tree, the walk's memory budget and stack), and waits, first come
// first served, while others hold it. So 1,024 spoold workers handed
// hostile scripts at once hold at most maxInFlight between them, not a
// thousand times one decision's worst.
var inFlight = semaphore.NewWeighted(maxInFlight)

// maxInFlight is what all decisions under way may hold at once: room for
// the largest (about 154 MiB) beside four ordinary ones (about 24 MiB
// each), or ten ordinary ones.
const maxInFlight = 256 << 20

// stackBytes is what a decision's stack may take at most (maxLevel levels
// of a few frames, and the expressions nested in each, MaxNesting deep).
const stackBytes = 8 << 20

// memLimit is the memory budget of the walk of a tree of nodes nodes.
func memLimit(nodes int) int { return maxMemory + treeBytes*nodes }

// cost is what a decision of a text of size bytes and nodes nodes may
// hold: the text and its copy without NULs, the tree, the walk, the stack.
func cost(size, nodes int) int64 {
	return int64(2*size + treeBytes*nodes + memLimit(nodes) + stackBytes)
}

// reserve waits until a decision of that cost may run; release gives
// it back.
func reserve(c int64) {
	// Acquire with a context that is never done cannot fail; it would wait
	// for ever for more than the pool (TestCostFitsThePool says it cannot
	// be asked).
	_ = inFlight.Acquire(context.Background(), min(c, maxInFlight))
}

func release(c int64) { inFlight.Release(min(c, maxInFlight)) }
