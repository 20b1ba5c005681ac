package ratelimit

import "github.com/sluicehq/ratelimit/stores/memory"

// NewMemoryStoreForTest gives tests in package ratelimit_test the default store.
var NewMemoryStoreForTest = func() Store { return memory.New() }

// NewMemoryStoreAt is the default store reading time from clock.
func NewMemoryStoreAt(clock Clock) Store { return memory.New(memory.WithClock(clock)) }
