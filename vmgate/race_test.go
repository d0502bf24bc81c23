//go:build race

package vmgate

// raceEnabled: the race detector is on, and makes the brute-force tests
// ten times slower: they try less.
const raceEnabled = true
