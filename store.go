package ratelimit

import "github.com/sluicehq/ratelimit/stores"

// Algorithm selects how a Store counts events against a Limit: GCRA (the
// zero value and the default), SlidingWindow, FixedWindow, Concurrency or
// SlidingLog. See package stores for what each counts.
type Algorithm = stores.Algorithm

// The algorithms a rule can count with; see package stores.
const (
	GCRA          = stores.GCRA
	SlidingWindow = stores.SlidingWindow
	FixedWindow   = stores.FixedWindow
	Concurrency   = stores.Concurrency
	SlidingLog    = stores.SlidingLog
)

// Limit describes how many events may happen and how fast: Rate events per
// Period on average, at most Burst at once. Build one with PerSecond,
// PerMinute, PerHour, PerDay or ParseLimit.
type Limit = stores.Limit

// Result is a Store's decision on one request: whether it is allowed, what
// remains, and when to retry. See package stores.
type Result = stores.Result

// A Store keeps rate-limit state and makes decisions against it: the
// in-process stores/memory (the default) or stores/redis. Package stores
// holds the contract for implementing one.
type Store = stores.Store

// Clock tells the time. Stores and middleware take one so that tests can
// control time; see ratelimittest.NewClock. stores.SystemClock is the
// default. A Clock of your own must be safe for concurrent use and cheap:
// it is read on every decision.
type Clock = stores.Clock
