package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// memoryStore is the in-process Store New uses when a rule names none: an
// adapter over the engine in internal/memstore, private to this package.
// Package stores/memory has its own adapter over the same engine (it imports
// this package, so this one cannot use it); both run the conformance suite
// and the same differential tests, so they cannot drift apart.
//
// A memoryStore is safe for concurrent use.
type memoryStore struct {
	engine *memstore.Store
	clock  Clock
}

var (
	_ Store             = (*memoryStore)(nil)
	_ stores.LocalStore = (*memoryStore)(nil)
	_ stores.Resetter   = (*memoryStore)(nil)
)

func newDefaultStore(clock Clock) *memoryStore {
	return &memoryStore{engine: memstore.New(memstore.Config{}), clock: clock}
}

func (s *memoryStore) Take(_ context.Context, req stores.Request) (Result, error) {
	m, err := engineRequest(&req)
	if err != nil {
		return Result{}, err
	}
	return fromEngine(&req, s.engine.Take(&m, s.clock.Now().UnixNano())), nil
}

func (s *memoryStore) TakeAll(_ context.Context, reqs []stores.Request, results []Result) error {
	return memstore.TakeBatch(s.engine, s.clock.Now().UnixNano(), reqs, results, ErrInvalidRequest, engineRequest, fromEngine)
}

func (s *memoryStore) Return(_ context.Context, req stores.Request) error {
	m, err := engineRequest(&req)
	if err == nil {
		s.engine.Return(&m, s.clock.Now().UnixNano())
	}
	return err
}

// Reset drops the state of (rule, key, alg); see Resetter.
func (s *memoryStore) Reset(_ context.Context, rule, key string, alg Algorithm) error {
	a, ok := engineAlg(alg)
	if !ok {
		return fmt.Errorf("%w: unknown %v", ErrInvalidRequest, alg)
	}
	s.engine.Delete(&memstore.Request{Rule: rule, Key: key, Alg: a})
	return nil
}

// Local reports that the store answers from process memory; see LocalStore.
func (s *memoryStore) Local() bool { return true }

// engineAlg maps an Algorithm onto the engine's enumeration, one case per
// value; ok is false for a value that names no algorithm.
func engineAlg(a Algorithm) (_ memstore.Alg, ok bool) {
	switch a {
	case GCRA:
		return memstore.GCRA, true
	case SlidingWindow:
		return memstore.SlidingWindow, true
	case FixedWindow:
		return memstore.FixedWindow, true
	case Concurrency:
		return memstore.Concurrency, true
	}
	return 0, false
}

// engineRequest validates r and converts it for the engine.
func engineRequest(r *stores.Request) (memstore.Request, error) {
	if err := r.Validate(); err != nil {
		return memstore.Request{}, err
	}
	return toEngine(r), nil
}

// toEngine converts r, which Validate accepted, for the engine.
func toEngine(r *stores.Request) memstore.Request {
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
	}
}

func fromEngine(r *stores.Request, res memstore.Result) Result {
	return Result{
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
