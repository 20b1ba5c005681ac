package memory

import (
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/memstore"
)

// engineAlg maps a ratelimit.Algorithm onto the engine's enumeration, one
// case per value; ok is false for a value that names no algorithm.
func engineAlg(a ratelimit.Algorithm) (_ memstore.Alg, ok bool) {
	switch a {
	case ratelimit.GCRA:
		return memstore.GCRA, true
	case ratelimit.SlidingWindow:
		return memstore.SlidingWindow, true
	case ratelimit.FixedWindow:
		return memstore.FixedWindow, true
	case ratelimit.Concurrency:
		return memstore.Concurrency, true
	case ratelimit.SlidingLog:
		return memstore.SlidingLog, true
	}
	return 0, false
}

// engineRequest validates r and converts it for the engine.
func engineRequest(r *ratelimit.Request) (memstore.Request, error) {
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

func fromEngine(r *ratelimit.Request, res memstore.Result) ratelimit.Result {
	return ratelimit.Result{
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
