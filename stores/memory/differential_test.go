package memory_test

import (
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/difftest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func newStore(clock ratelimit.Clock) ratelimit.Store { return memory.New(memory.WithClock(clock)) }

func TestGCRAMatchesXTimeRate(t *testing.T) { difftest.GCRAMatchesXTimeRate(t, newStore) }
