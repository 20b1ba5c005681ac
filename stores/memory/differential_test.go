package memory_test

import (
	"testing"

	"github.com/sluicehq/ratelimit/internal/difftest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func newStore(clock stores.Clock) stores.Store { return memory.New(memory.WithClock(clock)) }

func TestGCRAMatchesXTimeRate(t *testing.T) { difftest.GCRAMatchesXTimeRate(t, newStore) }
