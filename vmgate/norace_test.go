//go:build !race

package vmgate

const raceEnabled = false
