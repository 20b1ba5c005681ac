package ratelimittest

import (
	"context"

	"github.com/sluicehq/ratelimit"
)

// FailingStore is a ratelimit.Store whose backend is down: every call
// returns Err. Use it to test what your limits do when Redis fails (the
// rule's FailurePolicy, a breaker, an error handler).
type FailingStore struct {
	Err error
}

var _ ratelimit.Store = FailingStore{}

// Take returns s.Err.
func (s FailingStore) Take(context.Context, ratelimit.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, s.Err
}

// TakeAll returns s.Err.
func (s FailingStore) TakeAll(context.Context, []ratelimit.Request, []ratelimit.Result) error {
	return s.Err
}

// Return returns s.Err.
func (s FailingStore) Return(context.Context, ratelimit.Request) error { return s.Err }
