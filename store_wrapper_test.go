package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// zeroLimitStore rewrites every request's limit to the zero Limit before
// passing it on, like a wrapper that looks up a per-tenant limit and finds
// none.
type zeroLimitStore struct{ ratelimit.Store }

func (p zeroLimitStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	r.Limit = ratelimit.Limit{}
	return p.Store.Take(ctx, r)
}

// TestStoreRevalidatesRewrittenRequest: a request the limiter validated and
// a wrapper then rewrote is validated again by the memory store: the
// wrapper's invalid limit is an ErrInvalidLimit error answered with a 500
// (docs/failure.md: a misconfigured limit is never a bypass), never a
// division by zero.
func TestStoreRevalidatesRewrittenRequest(t *testing.T) {
	var got error
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Err != nil {
			got = e.Err
		}
	})
	h := ratelimit.New(ratelimit.PerSecond(5), ratelimit.ByIP(), ratelimit.WithStore(zeroLimitStore{memory.New()}),
		ratelimit.WithObserver(obs))(http.NotFoundHandler())
	code, body, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
	if p != nil {
		t.Fatalf("the store panicked instead of returning ErrInvalidLimit: %v", p)
	}
	if code != http.StatusInternalServerError {
		t.Errorf("%d %q, want 500", code, body)
	}
	if !errors.Is(got, ratelimit.ErrInvalidLimit) {
		t.Errorf("observed error %v, want ErrInvalidLimit", got)
	}
	_, err := zeroLimitStore{memory.New()}.Take(context.Background(), stores.Request{Key: "k", Limit: ratelimit.PerSecond(5), Cost: 1})
	if !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("direct call: %v, want ErrInvalidLimit", err)
	}
}
