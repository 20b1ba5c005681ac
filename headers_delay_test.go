package ratelimit_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// delayCase is a rule and the moments (offsets from the start) at which one
// client sends a request under it.
type delayCase struct {
	name string
	rule ratelimit.Rule
	at   []time.Duration
	opts []ratelimit.Option
}

// delayCases cover every rate algorithm, bursts, a calendar quota, and
// clients at, below and above the rate.
func delayCases() []delayCase {
	every := func(n int, d time.Duration, from time.Duration) []time.Duration {
		var at []time.Duration
		for i := range n {
			at = append(at, from+time.Duration(i)*d)
		}
		return at
	}
	burst := func(n int) []time.Duration { return make([]time.Duration, n) }
	cat := func(parts ...[]time.Duration) []time.Duration {
		var at []time.Duration
		for _, p := range parts {
			at = append(at, p...)
		}
		return at
	}
	rule := func(name string, l ratelimit.Limit, a ratelimit.Algorithm) ratelimit.Rule {
		return ratelimit.Rule{Name: name, Limit: l, Algorithm: a, Key: ratelimit.Global()}
	}
	return []delayCase{
		{name: "gcra burst", rule: rule("gcra", ratelimit.PerMinute(5), ratelimit.GCRA), at: cat(burst(6), every(4, 7*time.Second, 10*time.Second))},
		{name: "gcra steady", rule: rule("gcra", ratelimit.PerMinute(5), ratelimit.GCRA), at: every(8, 12*time.Second, 3*time.Second)},
		{name: "gcra burst above rate", rule: rule("gcra", ratelimit.PerSecond(2).WithBurst(7), ratelimit.GCRA), at: cat(burst(8), every(6, 300*time.Millisecond, 4*time.Second))},
		{name: "gcra sub-second", rule: rule("gcra", ratelimit.PerSecond(20), ratelimit.GCRA), at: cat(burst(21), every(5, 30*time.Millisecond, time.Second))},
		{name: "fixed", rule: rule("fixed", ratelimit.PerMinute(5), ratelimit.FixedWindow), at: cat(every(7, 9*time.Second, 17*time.Second))},
		{name: "sliding burst", rule: rule("sliding", ratelimit.PerMinute(5), ratelimit.SlidingWindow), at: cat(burst(5), every(9, 11*time.Second, 50*time.Second))},
		{name: "sliding steady", rule: rule("sliding", ratelimit.PerMinute(4), ratelimit.SlidingWindow), at: every(12, 15*time.Second, 4*time.Second)},
		{name: "quota", rule: ratelimit.Rule{Name: "daily", Quota: ratelimit.Daily(3, nil), Key: ratelimit.Global()}, at: every(4, 5*time.Hour, 7*time.Hour)},
	}
}

// replay serves the first n requests of c on a new limiter and clock, and
// returns the handler, the clock and the last response.
func (c delayCase) replay(t *testing.T, n int) (http.Handler, *ratelimittest.Clock, *ratelimittest.Response) {
	t.Helper()
	start := ratelimittest.Epoch().Add(7 * time.Second) // off every window boundary
	clock := ratelimittest.NewClock(start)
	h := ratelimit.NewRules([]ratelimit.Rule{c.rule}, append(c.opts, ratelimit.WithClock(clock))...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var resp *ratelimittest.Response
	for _, at := range c.at[:n] {
		if d := start.Add(at).Sub(clock.Now()); d > 0 {
			clock.Advance(d)
		}
		resp = ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	return h, clock, resp
}

// admitted sends n requests at once and returns how many were admitted.
func admitted(h http.Handler, n int) int {
	ok := 0
	for range n {
		if ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Code == http.StatusOK {
			ok++
		}
	}
	return ok
}

// TestRateLimitDelayIsTheEffectiveWindow checks t on allowed responses
// against its definition in draft-ietf-httpapi-ratelimit-headers-11: the
// seconds within which the client can use no more than the available
// quota r, that is until one more unit is available (revision 10: "until
// additional quota is made available"). After each allowed response the
// scenario is replayed twice: one second before t has passed at most r
// requests are admitted; once t has passed, r+1 are. Before the fix, a
// GCRA key reported when it would be full (after 4 of PerMinute(5):
// r=1;t=48, while a unit comes back at +12 s), a sliding window when both
// its windows would have expired (t up to 120 with w=60).
func TestRateLimitDelayIsTheEffectiveWindow(t *testing.T) {
	var cases []delayCase
	for _, c := range delayCases() {
		cases = append(cases, c) // a single static rule: the direct path
		c.name += "/general path"
		c.opts = []ratelimit.Option{ratelimit.WithHeaders(ratelimit.HeadersIETF | ratelimit.HeadersLegacy)}
		cases = append(cases, c)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 1; i <= len(c.at); i++ {
				_, _, resp := c.replay(t, i)
				if resp.Code != http.StatusOK {
					continue // denials: TestDeniedDelayIsTheRetryAfterValue
				}
				rl, err := ratelimittest.ParseRateLimit(resp.Header)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				r, tt := rl.Remaining, rl.Reset
				if tt <= 0 {
					t.Fatalf("request %d: %q: t must be positive on an allowed response of a rate rule", i, resp.Header.Get("RateLimit"))
				}
				desc := fmt.Sprintf("request %d at +%v: RateLimit %q", i, c.at[i-1], resp.Header.Get("RateLimit"))
				h, clock, _ := c.replay(t, i)
				clock.Advance(tt - time.Second)
				if got := admitted(h, r+1); got > r {
					t.Errorf("%s: %d requests admitted %v later, before t had passed; want at most r=%d", desc, got, tt-time.Second, r)
				}
				h, clock, _ = c.replay(t, i)
				clock.Advance(tt)
				if got := admitted(h, r+1); got != r+1 {
					t.Errorf("%s: %d requests admitted %v later, once t had passed; want r+1=%d (more quota was available)", desc, got, tt, r+1)
				}
			}
		})
	}
}

// TestStackedRulesReportTheLaterNextUnit: when stacked rate rules leave
// the same quota r, the one reported is the one whose next unit comes back
// last, so that t keeps its meaning for the request: after t, r+1 requests
// are admitted. A GCRA rule of PerMinute(4) spent at once is full again in
// 60 s but has a unit back in 15 s; a fixed window of PerMinute(4) spent at
// the same moment, 7 s into its minute, has nothing back for 53 s. The tie
// used to go to the later full bucket (ResetAfter), which reported the GCRA
// rule's r=0;t=15, and the request sent 15 s later was denied by the
// window for 38 s more.
func TestStackedRulesReportTheLaterNextUnit(t *testing.T) {
	gcra := ratelimit.Rule{Name: "gcra", Limit: ratelimit.PerMinute(4), Algorithm: ratelimit.GCRA, Key: ratelimit.Global()}
	fixed := ratelimit.Rule{Name: "fixed", Limit: ratelimit.PerMinute(4), Algorithm: ratelimit.FixedWindow, Key: ratelimit.Global()}
	for _, rules := range [][]ratelimit.Rule{{gcra, fixed}, {fixed, gcra}} {
		t.Run(rules[0].Name+" first", func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch().Add(7 * time.Second)) // 7 s into the window
			h := ratelimit.NewRules(rules, ratelimit.WithClock(clock))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			var resp *ratelimittest.Response
			for range 4 {
				resp = ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
			}
			if resp.Code != http.StatusOK {
				t.Fatalf("4th request: %d, want 200", resp.Code)
			}
			rl, err := ratelimittest.ParseRateLimit(resp.Header)
			if err != nil {
				t.Fatal(err)
			}
			if rl.Remaining != 0 {
				t.Fatalf("RateLimit %q: r=%d, want 0", resp.Header.Get("RateLimit"), rl.Remaining)
			}
			clock.Advance(rl.Reset)
			if got := admitted(h, 1); got != 1 {
				t.Errorf("RateLimit %q: the request sent t=%v later was denied; t must be when one more unit is available", resp.Header.Get("RateLimit"), rl.Reset)
			}
		})
	}
}
