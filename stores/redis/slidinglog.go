package redisstore

import (
	_ "embed"

	"github.com/sluicehq/ratelimit"
)

// logSource holds the sliding log's functions (see slidinglog.lua), which
// script.lua calls: the script is clock.lua, then this, then script.lua.
//
//go:embed slidinglog.lua
var logSource string

// wireLog is the sliding log's algorithm number in the script's fields: 4,
// its ratelimit.Algorithm value, is the script's GCRA lease.
const wireLog = 5

// wireAlg is the script's number for algorithm a.
func wireAlg(a ratelimit.Algorithm) int {
	if a == ratelimit.SlidingLog {
		return wireLog
	}
	return int(a)
}
