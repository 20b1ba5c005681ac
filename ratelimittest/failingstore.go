package ratelimittest

import (
	"context"
	"errors"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// FailingStore is a ratelimit.Store whose backend is down: every call
// fails with Err. Use it to test what your limits do when Redis fails (the
// rule's FailurePolicy, a breaker, an error handler). The zero value is
// ready to use: its calls fail with an error of its own.
type FailingStore struct {
	Err error // nil: an error saying the store is down
}

// errDown is the error of a FailingStore without Err.
var errDown = errors.New("ratelimittest: FailingStore: the store is down")

func (s FailingStore) err() error {
	if s.Err == nil {
		return errDown
	}
	return s.Err
}

var _ ratelimit.Store = FailingStore{}

// Take fails with the store's error (Err, or its own).
func (s FailingStore) Take(context.Context, stores.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, s.err()
}

// TakeAll fails with the store's error.
func (s FailingStore) TakeAll(context.Context, []stores.Request, []ratelimit.Result) error {
	return s.err()
}

// Return fails with the store's error.
func (s FailingStore) Return(context.Context, stores.Request) error { return s.err() }
