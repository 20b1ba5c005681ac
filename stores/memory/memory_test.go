package memory_test

import (
	"testing"

	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func TestConformance(t *testing.T) {
	ratelimittest.TestStore(t, func(t *testing.T, clock stores.Clock) stores.Store {
		return memory.New(memory.WithClock(clock))
	})
}

func TestConformanceOneShard(t *testing.T) {
	ratelimittest.TestStore(t, func(t *testing.T, clock stores.Clock) stores.Store {
		return memory.New(memory.WithClock(clock), memory.WithShards(1))
	})
}
