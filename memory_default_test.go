package ratelimit_test

import (
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/difftest"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func newDefaultStore(clock ratelimit.Clock) ratelimit.Store { return ratelimit.NewMemoryStoreAt(clock) }

func TestDefaultStoreConformance(t *testing.T) {
	ratelimittest.TestStore(t, func(_ *testing.T, clock ratelimit.Clock) ratelimit.Store {
		return newDefaultStore(clock)
	})
}

func TestDefaultStoreGCRAMatchesXTimeRate(t *testing.T) {
	difftest.GCRAMatchesXTimeRate(t, newDefaultStore)
}

// TestDefaultStoreAgreesWithStoresMemory keeps the two adapters over the
// engine from drifting: the same operations get the same answers.
func TestDefaultStoreAgreesWithStoresMemory(t *testing.T) {
	difftest.AdaptersAgree(t, newDefaultStore, func(clock ratelimit.Clock) ratelimit.Store {
		return memory.New(memory.WithClock(clock))
	})
}

func TestDefaultStoreMapsEveryAlgorithmByName(t *testing.T) {
	difftest.MapsEveryAlgorithmByName(t, ratelimit.EngineAlg)
}

func TestDefaultStoreRefusesUnknownAlgorithm(t *testing.T) {
	difftest.UnknownAlgorithmIsInvalid(t, newDefaultStore)
}
