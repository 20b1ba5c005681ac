package memory

import (
	"testing"

	"github.com/sluicehq/ratelimit/internal/difftest"
	"github.com/sluicehq/ratelimit/stores"
)

func TestEngineAlgMapsEveryAlgorithmByName(t *testing.T) {
	difftest.MapsEveryAlgorithmByName(t, engineAlg)
}

func TestUnknownAlgorithmIsInvalid(t *testing.T) {
	difftest.UnknownAlgorithmIsInvalid(t, func(clock stores.Clock) stores.Store { return New(WithClock(clock)) })
}
