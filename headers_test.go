package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestPolicyWindow: w is the Period of a window algorithm and the refill
// time of GCRA, Capacity*Period/Rate, in whole seconds, never one second
// more because Interval is rounded up to the nanosecond.
func TestPolicyWindow(t *testing.T) {
	cases := []struct {
		limit ratelimit.Limit
		alg   ratelimit.Algorithm
		want  string
	}{
		{ratelimit.PerMinute(7), ratelimit.GCRA, `"p";q=7;w=60`},
		{ratelimit.PerSecond(3), ratelimit.FixedWindow, `"p";q=3;w=1`},
		{ratelimit.PerSecond(3), ratelimit.GCRA, `"p";q=3;w=1`},
		{ratelimit.PerMinute(7), ratelimit.SlidingWindow, `"p";q=7;w=60`},
		{ratelimit.PerHour(7), ratelimit.FixedWindow, `"p";q=7;w=3600`},
		{ratelimit.PerSecond(10).WithBurst(25), ratelimit.GCRA, `"p";q=25;w=3`}, // 2.5s, rounded up
		{ratelimit.PerMinute(1).WithBurst(1), ratelimit.GCRA, `"p";q=1;w=60`},
		{ratelimit.Limit{Rate: 3, Period: 500 * time.Millisecond}, ratelimit.FixedWindow, `"p";q=3;w=1`},
		{ratelimit.Limit{Rate: 2, Period: time.Minute}, ratelimit.Concurrency, `"p";q=2;qu="concurrent-requests"`},
	}
	for _, c := range cases {
		h := ratelimit.New(c.limit, ratelimit.Global(), ratelimit.WithName("p"), ratelimit.WithAlgorithm(c.alg))(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		if got := resp.Header.Get("RateLimit-Policy"); got != c.want {
			t.Errorf("%v %v: RateLimit-Policy %s, want %s", c.alg, c.limit, got, c.want)
		}
	}
}

// TestConcurrencyPolicyParses: the concurrent-requests member reads back as
// a quota of requests in flight, with no window.
func TestConcurrencyPolicyParses(t *testing.T) {
	h := ratelimit.New(ratelimit.Limit{Rate: 2, Period: time.Minute}, ratelimit.Global(), ratelimit.WithName("c"),
		ratelimit.WithAlgorithm(ratelimit.Concurrency))(http.NotFoundHandler())
	ps, err := ratelimittest.ParsePolicies(ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Header)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ratelimittest.Policy{Name: "c", Quota: 2, Unit: "concurrent-requests"}); len(ps) != 1 || ps[0] != want {
		t.Fatalf("policies %+v, want [%+v]", ps, want)
	}
}

// TestFailClosedProblemType: the problem type matches the status, as the
// draft registers them: quota-exceeded for 429, temporary-reduced-capacity
// for 503.
func TestFailClosedProblemType(t *testing.T) {
	down := ratelimittest.FailingStore{Err: errors.New("down")}
	for status, want := range map[int]string{
		429: "https://iana.org/assignments/http-problem-types#quota-exceeded",
		503: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
	} {
		h := ratelimit.New(ratelimit.PerMinute(5), ratelimit.Global(), ratelimit.WithStore(down),
			ratelimit.WithFailurePolicy(ratelimit.FailClosed(status)))(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		var body struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("FailClosed(%d): body %q: %v", status, resp.Body, err)
		}
		if resp.Code != status || body.Status != status || body.Type != want {
			t.Errorf("FailClosed(%d): %d with type %q, want %q", status, resp.Code, body.Type, want)
		}
	}
}

// zeroWaitDenier denies every request with the given RetryAfter (a store
// whose clock is ahead, or one that rounds the wait down to zero).
type zeroWaitDenier struct {
	ratelimittest.FailingStore
	wait time.Duration
}

func (s zeroWaitDenier) Take(_ context.Context, req ratelimit.Request) (ratelimit.Result, error) {
	return ratelimit.Result{Limit: req.Limit, RetryAfter: s.wait, ResetAfter: time.Minute}, nil
}

// TestDeniedDelayIsTheRetryAfterValue: on a 429, RateLimit's t is the
// Retry-After value, at least one second, even when the store reports a
// wait of zero or less: t=0 would invite a retry that is denied again.
func TestDeniedDelayIsTheRetryAfterValue(t *testing.T) {
	for _, wait := range []time.Duration{0, -3 * time.Second, time.Nanosecond, 1500 * time.Millisecond} {
		l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.Global(), ratelimit.WithStore(zeroWaitDenier{wait: wait}))
		w := httptest.NewRecorder()
		l.Check(httptest.NewRequest("GET", "/", nil)).Write(w)
		retry := w.Header().Get("Retry-After")
		rl := w.Header().Get("RateLimit")
		if w.Code != http.StatusTooManyRequests || retry == "" || !strings.HasSuffix(rl, ";t="+retry) {
			t.Errorf("store wait %v: %d, Retry-After %q, RateLimit %q; want a 429 whose t is the Retry-After value", wait, w.Code, retry, rl)
		}
	}
}
