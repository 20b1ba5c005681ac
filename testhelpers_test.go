package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// errStoreDown is the error of stores that tests take down.
var errStoreDown = errors.New("store down")

// serve serves r with h and returns the status and body, or what h panicked
// with.
func serve(h http.Handler, r *http.Request) (code int, body string, panicked any) {
	defer func() { panicked = recover() }()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String(), nil
}

// countedPair returns two counted stores for a rule stacked on another:
// healthy, a memory store on clock, and second, another memory store on
// clock or, with fail, one whose every call fails.
func countedPair(clock ratelimit.Clock, fail bool) (healthy, second *ratelimittest.CountingStore) {
	var other ratelimit.Store = memory.New(memory.WithClock(clock))
	if fail {
		other = failingStore
	}
	return &ratelimittest.CountingStore{Store: memory.New(memory.WithClock(clock))}, &ratelimittest.CountingStore{Store: other}
}
