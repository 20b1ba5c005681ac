package memory

import (
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/difftest"
)

func TestEngineAlgMapsEveryAlgorithmByName(t *testing.T) {
	difftest.MapsEveryAlgorithmByName(t, engineAlg)
}

func TestUnknownAlgorithmIsInvalid(t *testing.T) {
	difftest.UnknownAlgorithmIsInvalid(t, func(clock ratelimit.Clock) ratelimit.Store { return New(WithClock(clock)) })
}
