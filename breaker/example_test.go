package breaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// A Breaker in front of a store that is down: after Failures consecutive
// failures it stops calling the store and fails at once with ErrOpen, which
// a Limiter treats as ErrStoreUnavailable.
func Example() {
	down := ratelimittest.FailingStore{Err: errors.New("connection refused")}
	b := breaker.New(down, breaker.Config{
		Failures:      2,
		OnStateChange: func(from, to breaker.State) { fmt.Println(from, "->", to) },
	})
	req := stores.Request{Key: "k", Limit: ratelimit.PerSecond(10), Cost: 1}
	for range 3 {
		_, err := b.Take(context.Background(), req)
		fmt.Println(errors.Is(err, breaker.ErrOpen), errors.Is(err, ratelimit.ErrStoreUnavailable))
	}
	// Output:
	// false false
	// closed -> open
	// false false
	// true true
}
