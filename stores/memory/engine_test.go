package memory_test

import (
	"testing"

	"github.com/sluicehq/ratelimit/internal/difftest"
	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func TestEngineAlgMapsEveryAlgorithmByName(t *testing.T) {
	difftest.MapsEveryAlgorithmByName(t, memstore.AlgOf)
}

func TestUnknownAlgorithmIsInvalid(t *testing.T) {
	difftest.UnknownAlgorithmIsInvalid(t, func(clock stores.Clock) stores.Store { return memory.New(memory.WithClock(clock)) })
}
