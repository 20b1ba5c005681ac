package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
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
		h := ratelimit.NewRules([]ratelimit.Rule{{Limit: c.limit, Key: ratelimit.Global(), Name: "p", Algorithm: c.alg}})(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		if got := resp.Header.Get("RateLimit-Policy"); got != c.want {
			t.Errorf("%v %v: RateLimit-Policy %s, want %s", c.alg, c.limit, got, c.want)
		}
	}
}

// TestConcurrencyPolicyParses: the concurrent-requests member reads back as
// a quota of requests in flight, with no window.
func TestConcurrencyPolicyParses(t *testing.T) {
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Key: ratelimit.Global(), Name: "c", Algorithm: ratelimit.Concurrency}})(http.NotFoundHandler())
	ps, err := ratelimittest.ParsePolicies(ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Header)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ratelimittest.Policy{Name: "c", Quota: 2, Unit: "concurrent-requests"}); len(ps) != 1 || ps[0] != want {
		t.Fatalf("policies %+v, want [%+v]", ps, want)
	}
}

// TestConcurrencyIsNoRateInTheFields: a Concurrency rule counts requests
// in flight, so its RateLimit member has r (free slots) and no t (slots
// come back when requests finish, not after the slot lifetime, which was
// sent as t=60), and an allowed request reports the rate rule beside it
// even when fewer slots are free than quota is left: a client reading
// "inflight";r=1;t=60 as a rate waited a minute before each request.
// Denied for want of a slot, the member says r=0 and Retry-After says 1.
func TestConcurrencyIsNoRateInTheFields(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "rate", Limit: ratelimit.PerMinute(100), Key: ratelimit.Global()},
		{Name: "inflight", Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global()},
	})
	want := []struct {
		code       int
		rateLimit  string
		retryAfter string
	}{
		{200, `"rate";r=99;t=1`, ""},
		{200, `"rate";r=98;t=1`, ""},
		{429, `"inflight";r=0`, "1"},
	}
	for i, w := range want {
		rec := httptest.NewRecorder()
		v := l.Check(httptest.NewRequest("GET", "/", nil)) // held: never Done
		v.Write(rec)
		if got := rec.Header().Values("RateLimit"); rec.Code != w.code || len(got) != 1 || got[0] != w.rateLimit || rec.Header().Get("Retry-After") != w.retryAfter {
			t.Errorf("request %d: %d RateLimit %q Retry-After %q; want %d %q %q", i+1, rec.Code, got, rec.Header().Get("Retry-After"), w.code, w.rateLimit, w.retryAfter)
		}
		if got, want := rec.Header().Get("RateLimit-Policy"), `"rate";q=100;w=60, "inflight";q=2;qu="concurrent-requests"`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
	}

	only := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Key: ratelimit.Global(), Name: "c", Algorithm: ratelimit.Concurrency}})
	rec := httptest.NewRecorder()
	only.Check(httptest.NewRequest("GET", "/", nil)).Write(rec)
	if got := rec.Header().Get("RateLimit"); got != `"c";r=1` {
		t.Errorf("Concurrency alone: RateLimit %q, want %q", got, `"c";r=1`)
	}
}

// TestConcurrencyLegacyFieldsHaveNoReset: the legacy fields of an allowed
// request under a Concurrency rule carry no X-RateLimit-Reset, as its
// RateLimit member carries no t: slots come back when requests finish.
// It said now+60 s (the slot lifetime), and a client pacing on the legacy
// triple (this repository's client Transport does) spread two requests
// over a minute. A denial still says when to retry (Retry-After: 1).
func TestConcurrencyLegacyFieldsHaveNoReset(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Key: ratelimit.Global(), Name: "c", Algorithm: ratelimit.Concurrency}}, ratelimit.WithHeaders(ratelimit.HeadersLegacy), ratelimit.WithClock(clock))
	for i, want := range []struct {
		code             int
		remaining, reset string
	}{
		{200, "1", ""},
		{200, "0", ""},
		{429, "0", strconv.FormatInt(clock.Now().Unix()+1, 10)},
	} {
		rec := httptest.NewRecorder()
		l.Check(httptest.NewRequest("GET", "/", nil)).Write(rec) // held: never Done
		h := rec.Header()
		if rec.Code != want.code || h.Get("X-RateLimit-Limit") != "2" || h.Get("X-RateLimit-Remaining") != want.remaining || h.Get("X-RateLimit-Reset") != want.reset {
			t.Errorf("request %d: %d X-RateLimit-Limit %q Remaining %q Reset %q; want %d \"2\" %q %q",
				i+1, rec.Code, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), want.code, want.remaining, want.reset)
		}
	}
}

// TestAdaptiveRejectionHasNoEffectiveWindow: an adaptive rule limits
// requests in flight too, so its rejection's RateLimit member says r=0
// without t (it said t=1); Retry-After: 1 tells when to come back.
func TestAdaptiveRejectionHasNoEffectiveWindow(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 1, Max: 1, Initial: 1}}})
	held := l.Check(httptest.NewRequest("GET", "/", nil)) // holds the one slot
	defer held.Done()
	rec := httptest.NewRecorder()
	l.Check(httptest.NewRequest("GET", "/", nil)).Write(rec)
	if got := rec.Header().Get("RateLimit"); rec.Code != http.StatusServiceUnavailable || got != `"inflight";r=0` || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("rejection: %d RateLimit %q Retry-After %q; want 503 %q 1", rec.Code, got, rec.Header().Get("Retry-After"), `"inflight";r=0`)
	}
	if got, want := rec.Header().Get("RateLimit-Policy"), `"inflight";q=1;qu="concurrent-requests"`; got != want {
		t.Fatalf("rejection: RateLimit-Policy %q, want %q", got, want)
	}
}

// TestFailClosedIsNoQuotaViolation: a request stopped because a store
// failed under fail closed exceeded no quota, so its answer says so: the
// problem type temporary-reduced-capacity (the limiter cannot count), no
// violated-policies member, no rate-limit fields (no rule decided), and
// Retry-After: 1, whichever status fail closed was given.
func TestFailClosedIsNoQuotaViolation(t *testing.T) {
	down := ratelimittest.FailingStore{Err: errors.New("down")}
	for _, status := range []int{429, 503} {
		h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerMinute(5), Key: ratelimit.Global(), OnStoreError: ratelimit.FailurePolicy{Status: status}}}, ratelimit.WithStore(down))(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		var body map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("FailClosed(%d): body %q: %v", status, resp.Body, err)
		}
		const want = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
		if resp.Code != status || body["status"] != float64(status) || body["type"] != want {
			t.Errorf("FailClosed(%d): %d with type %v, status %v; want type %q", status, resp.Code, body["type"], body["status"], want)
		}
		if v, ok := body["violated-policies"]; ok {
			t.Errorf("FailClosed(%d): violated-policies %v in %q; no policy was violated", status, v, resp.Body)
		}
		for _, k := range []string{"RateLimit", "RateLimit-Policy"} {
			if v := resp.Header.Values(k); len(v) > 0 {
				t.Errorf("FailClosed(%d): %s %q; no rule decided", status, k, v)
			}
		}
		if got := resp.Header.Get("Retry-After"); got != "1" {
			t.Errorf("FailClosed(%d): Retry-After %q, want 1", status, got)
		}
	}
}

// zeroWaitDenier denies every request with the given RetryAfter (a store
// whose clock is ahead, or one that rounds the wait down to zero).
type zeroWaitDenier struct {
	ratelimittest.FailingStore
	wait time.Duration
}

func (s zeroWaitDenier) Take(_ context.Context, req stores.Request) (ratelimit.Result, error) {
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
