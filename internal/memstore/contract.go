package memstore

import (
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// AlgOf maps a stores.Algorithm onto the engine's enumeration, one case
// per value; ok is false for a value that names no algorithm.
func AlgOf(a stores.Algorithm) (_ Alg, ok bool) {
	switch a {
	case stores.GCRA:
		return GCRA, true
	case stores.SlidingWindow:
		return SlidingWindow, true
	case stores.FixedWindow:
		return FixedWindow, true
	case stores.Concurrency:
		return Concurrency, true
	case stores.SlidingLog:
		return SlidingLog, true
	}
	return 0, false
}

// Convert validates r and converts it for the engine.
func Convert(r *stores.Request) (Request, error) {
	if err := r.Validate(); err != nil {
		return Request{}, err
	}
	return Valid(r), nil
}

// Valid converts r, which Validate accepted, for the engine.
func Valid(r *stores.Request) Request {
	alg, _ := AlgOf(r.Algorithm) // Validate rejected a value with no case
	return Request{
		Rule: r.Rule, Key: r.Key, Alg: alg,
		Limit: Limit{
			Rate: int64(r.Limit.Rate), Period: int64(r.Limit.Period),
			Capacity: int64(r.Limit.Capacity()), Interval: int64(r.Limit.Interval()),
		},
		Cost:     int64(r.Cost),
		WinStart: r.Window.Start, WinEnd: r.Window.End, WinNext: r.Window.NextEnd,
		Slot: r.Slot, MaxDelay: int64(r.MaxDelay), Force: r.Force,
	}
}

// Back converts the engine's decision on r into the contract's Result.
func Back(r *stores.Request, res Result) stores.Result { return res.Under(r.Limit) }

// Under is the engine's decision res, made under limit, as the contract's
// Result.
func (res *Result) Under(limit stores.Limit) stores.Result {
	return stores.Result{
		Allowed:    res.Allowed,
		Limit:      limit,
		Remaining:  int(res.Remaining),
		RetryAfter: time.Duration(res.RetryAfter),
		ResetAfter: time.Duration(res.ResetAfter),
		Slot:       res.Slot,
		Delay:      time.Duration(res.Delay),
		NextAfter:  time.Duration(res.Next),
	}
}

// Handle is what package ratelimit reads from a stores/memory Store to run
// its engine directly: the engine and the clock the store reads.
type Handle struct {
	Engine *Store
	Clock  stores.Clock
}
