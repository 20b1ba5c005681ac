package ratelimittest

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// expectTakes checks that s was asked takes times in all, with Take
// alone, and never given anything back.
func expectTakes(t *testing.T, s *CountingStore, takes int64, what string) {
	t.Helper()
	if s.Takes.Load() != takes || s.TakeAlls.Load() != 0 || s.Returns.Load() != 0 {
		t.Errorf("%s: the store got %d Take, %d TakeAll and %d Return calls; want %d Take alone",
			what, s.Takes.Load(), s.TakeAlls.Load(), s.Returns.Load(), takes)
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
			cs := &CountingStore{Store: tc.store}
			l := ratelimit.NewLimiter(ratelimit.PerMinute(2), ratelimit.ByIP(), ratelimit.WithStore(cs), ratelimit.WithClock(clock))
			h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
			for i, want := range tc.codes {
				if resp := send(h, "GET", "/x"); resp.Code != want {
					t.Fatalf("request %d: %d, want %d", i+1, resp.Code, want)
				}
			}
			expectTakes(t, cs, int64(len(tc.codes)), tc.name)
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
