//go:build race

package redisstore

// raceEnabled reports a -race build, which runs several times slower: tests
// whose subject is a real-time budget scale it by raceSlowdown.
const raceEnabled = true
