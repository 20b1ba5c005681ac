package difftest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// MapsEveryAlgorithmByName checks an adapter's mapping of stores.Algorithm
// onto the engine's enumeration for every value of the type: each named
// algorithm onto the engine constant of the same name, every other value
// refused.
func MapsEveryAlgorithmByName(t *testing.T, engineAlg func(stores.Algorithm) (memstore.Alg, bool)) {
	want := map[stores.Algorithm]memstore.Alg{
		stores.GCRA:          memstore.GCRA,
		stores.SlidingWindow: memstore.SlidingWindow,
		stores.FixedWindow:   memstore.FixedWindow,
		stores.Concurrency:   memstore.Concurrency,
		stores.SlidingLog:    memstore.SlidingLog,
	}
	for v := 0; v < 256; v++ {
		a := stores.Algorithm(v)
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
	s := newStore(stores.SystemClock())
	ctx := context.Background()
	for _, a := range []stores.Algorithm{5, 255} {
		req := stores.Request{Key: "k", Limit: stores.Limit{Rate: 1, Period: time.Second}, Algorithm: a, Cost: 1}
		if _, err := s.Take(ctx, req); !errors.Is(err, stores.ErrInvalidRequest) {
			t.Errorf("Take(%v) = %v; want ErrInvalidRequest", a, err)
		}
		if err := s.Return(ctx, req); !errors.Is(err, stores.ErrInvalidRequest) {
			t.Errorf("Return(%v) = %v; want ErrInvalidRequest", a, err)
		}
		if err := s.(stores.Resetter).Reset(ctx, "r", "k", a); !errors.Is(err, stores.ErrInvalidRequest) {
			t.Errorf("Reset(%v) = %v; want ErrInvalidRequest", a, err)
		}
	}
}
