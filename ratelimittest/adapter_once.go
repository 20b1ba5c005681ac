package ratelimittest

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// countingStore counts the calls its Store gets.
type countingStore struct {
	ratelimit.Store
	takes, takeAlls, returns atomic.Int64
}

func (s *countingStore) Take(ctx context.Context, req stores.Request) (ratelimit.Result, error) {
	s.takes.Add(1)
	return s.Store.Take(ctx, req)
}

func (s *countingStore) TakeAll(ctx context.Context, reqs []stores.Request, res []ratelimit.Result) error {
	s.takeAlls.Add(1)
	return s.Store.TakeAll(ctx, reqs, res)
}

func (s *countingStore) Return(ctx context.Context, req stores.Request) error {
	s.returns.Add(1)
	return s.Store.Return(ctx, req)
}

// expect checks that the store was asked takes times in all, with Take
// alone, and never given anything back.
func (s *countingStore) expect(t *testing.T, takes int64, what string) {
	t.Helper()
	if s.takes.Load() != takes || s.takeAlls.Load() != 0 || s.returns.Load() != 0 {
		t.Errorf("%s: the store got %d Take, %d TakeAll and %d Return calls; want %d Take alone",
			what, s.takes.Load(), s.takeAlls.Load(), s.returns.Load(), takes)
	}
}

// testDecidesOnce: every request is decided once, by one store call, when
// it is admitted, when it is denied and when its store fails and the
// request is let through; and on the in-process store, whose calls cannot
// be counted from outside, each request consumes exactly one unit.
func (a Adapter) testDecidesOnce(t *testing.T) {
	clock := NewClock(Epoch())
	cases := []struct {
		name    string
		store   ratelimit.Store
		codes   []int
		handled int64
	}{
		{"Admitted", memory.New(memory.WithClock(clock)), []int{200, 200}, 2},
		{"Denied", memory.New(memory.WithClock(clock)), []int{200, 200, 429}, 2},
		{"FailedOpen", FailingStore{}, []int{200, 200}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hs handlers
			cs := &countingStore{Store: tc.store}
			l := ratelimit.NewLimiter(ratelimit.PerMinute(2), ratelimit.ByIP(), ratelimit.WithStore(cs), ratelimit.WithClock(clock))
			h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
			for i, want := range tc.codes {
				if resp := send(h, "GET", "/x"); resp.Code != want {
					t.Fatalf("request %d: %d, want %d", i+1, resp.Code, want)
				}
			}
			cs.expect(t, int64(len(tc.codes)), tc.name)
			hs.expectCalls(t, tc.handled, tc.name)
		})
	}
	t.Run("InProcessStore", func(t *testing.T) {
		var hs handlers
		l := ratelimit.NewLimiter(ratelimit.PerMinute(5), ratelimit.ByIP(), still())
		h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
		for i := range 5 {
			rl, err := ParseRateLimit(send(h, "GET", "/x").Header)
			if err != nil || rl.Remaining != 4-i {
				t.Fatalf("request %d: RateLimit %+v, %v; want r=%d", i+1, rl, err, 4-i)
			}
		}
		if resp := send(h, "GET", "/x"); resp.Code != http.StatusTooManyRequests {
			t.Fatalf("request 6: %d, want 429", resp.Code)
		}
		hs.expectCalls(t, 5, "in-process store")
	})
}
