package ratelimit

import "github.com/sluicehq/ratelimit/stores"

// NewMemoryStoreForTest gives tests in package ratelimit_test the default store.
var NewMemoryStoreForTest = func() Store { return newDefaultStore(stores.SystemClock()) }

// NewMemoryStoreAt is the default store reading time from clock.
func NewMemoryStoreAt(clock Clock) Store { return newDefaultStore(clock) }

// EngineAlg is the default store's mapping of Algorithm onto the engine's.
var EngineAlg = engineAlg
