package difftest

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/memstore"
)

// MapsEveryAlgorithmByName checks an adapter's mapping of ratelimit.Algorithm
// onto the engine's enumeration for every value of the type: each named
// algorithm onto the engine constant of the same name, every other value
// refused.
func MapsEveryAlgorithmByName(t *testing.T, engineAlg func(ratelimit.Algorithm) (memstore.Alg, bool)) {
	want := map[ratelimit.Algorithm]memstore.Alg{
		ratelimit.GCRA:          memstore.GCRA,
		ratelimit.SlidingWindow: memstore.SlidingWindow,
		ratelimit.FixedWindow:   memstore.FixedWindow,
		ratelimit.Concurrency:   memstore.Concurrency,
		ratelimit.SlidingLog:    memstore.SlidingLog,
	}
	for v := 0; v < 256; v++ {
		a := ratelimit.Algorithm(v)
		got, ok := engineAlg(a)
		w, known := want[a]
		if ok != known || got != w {
			t.Errorf("engineAlg(%v) = %v, %v; want %v, %v", a, got, ok, w, known)
		}
	}
}

// UnknownAlgorithmIsInvalid checks that Take, Return and Reset refuse an
// algorithm with no name with ErrInvalidRequest.
func UnknownAlgorithmIsInvalid(t *testing.T, newStore NewStore) {
	s := newStore(ratelimit.SystemClock())
	ctx := context.Background()
	for _, a := range []ratelimit.Algorithm{5, 255} {
		req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), Algorithm: a, Cost: 1}
		if _, err := s.Take(ctx, req); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("Take(%v) = %v; want ErrInvalidRequest", a, err)
		}
		if err := s.Return(ctx, req); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("Return(%v) = %v; want ErrInvalidRequest", a, err)
		}
		if err := s.(ratelimit.Resetter).Reset(ctx, "r", "k", a); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("Reset(%v) = %v; want ErrInvalidRequest", a, err)
		}
	}
}
