package memory

import (
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// engineAlg maps a stores.Algorithm onto the engine's enumeration, one
// case per value; ok is false for a value that names no algorithm.
func engineAlg(a stores.Algorithm) (_ memstore.Alg, ok bool) {
	switch a {
	case stores.GCRA:
		return memstore.GCRA, true
	case stores.SlidingWindow:
		return memstore.SlidingWindow, true
	case stores.FixedWindow:
		return memstore.FixedWindow, true
	case stores.Concurrency:
		return memstore.Concurrency, true
	}
	return 0, false
}

// engineRequest validates r and converts it for the engine.
func engineRequest(r *stores.Request) (memstore.Request, error) {
	if err := r.Validate(); err != nil {
		return memstore.Request{}, err
	}
	alg, _ := engineAlg(r.Algorithm) // Validate rejected a value with no case
	return memstore.Request{
		Rule: r.Rule, Key: r.Key, Alg: alg,
		Limit: memstore.Limit{
			Rate: int64(r.Limit.Rate), Period: int64(r.Limit.Period),
			Capacity: int64(r.Limit.Capacity()), Interval: int64(r.Limit.Interval()),
		},
		Cost:     int64(r.Cost),
		WinStart: r.Window.Start, WinEnd: r.Window.End, WinNext: r.Window.NextEnd,
		Slot: r.Slot, MaxDelay: int64(r.MaxDelay), Force: r.Force,
	}, nil
}

func fromEngine(r *stores.Request, res memstore.Result) stores.Result {
	return stores.Result{
		Allowed:    res.Allowed,
		Limit:      r.Limit,
		Remaining:  int(res.Remaining),
		RetryAfter: time.Duration(res.RetryAfter),
		ResetAfter: time.Duration(res.ResetAfter),
		Slot:       res.Slot,
		Delay:      time.Duration(res.Delay),
		NextAfter:  time.Duration(res.Next),
	}
}
