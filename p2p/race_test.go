//go:build race

package p2p_test

// raceEnabled is true when the race detector runs, which makes the
// stream floods of the resource tests several times slower.
const raceEnabled = true
