package ratelimittest

import (
	"context"
	"sync/atomic"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// CountingStore wraps a ratelimit.Store and counts the calls it gets,
// failed ones included, so that a test can check how often a limiter asks
// its store: a request decided once is one Take or TakeAll, and one given
// back is a Return. Only the Store methods of the wrapped store are
// reachable through it, so a limiter on a CountingStore of a memory store
// takes its general path, as on a remote store.
//
// A CountingStore is safe for concurrent use; its counters may be read
// (and reset) while calls run.
type CountingStore struct {
	ratelimit.Store
	Takes, TakeAlls, Returns atomic.Int64
}

// Take counts the call and passes it on.
func (s *CountingStore) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	s.Takes.Add(1)
	return s.Store.Take(ctx, req)
}

// TakeAll counts the call and passes it on.
func (s *CountingStore) TakeAll(ctx context.Context, reqs []stores.Request, res []ratelimit.Result) error {
	s.TakeAlls.Add(1)
	return s.Store.TakeAll(ctx, reqs, res)
}

// Return counts the call and passes it on.
func (s *CountingStore) Return(ctx context.Context, req stores.Request) error {
	s.Returns.Add(1)
	return s.Store.Return(ctx, req)
}

// Decisions is the number of Take and TakeAll calls.
func (s *CountingStore) Decisions() int64 { return s.Takes.Load() + s.TakeAlls.Load() }

// Calls is the number of calls of every kind.
func (s *CountingStore) Calls() int64 { return s.Decisions() + s.Returns.Load() }
