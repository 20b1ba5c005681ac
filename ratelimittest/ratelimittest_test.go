package ratelimittest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

func TestClock(t *testing.T) {
	c := ratelimittest.NewClock(time.Time{})
	if !c.Now().Equal(ratelimittest.Epoch()) {
		t.Fatalf("zero start: %v", c.Now())
	}
	if got := c.Advance(90 * time.Second); !got.Equal(ratelimittest.Epoch().Add(90 * time.Second)) {
		t.Fatalf("Advance: %v", got)
	}
	at := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)
	c.Set(at)
	if !c.Now().Equal(at) {
		t.Fatalf("Set: %v", c.Now())
	}
}

func TestNewRequest(t *testing.T) {
	r := ratelimittest.NewRequest("POST", "/login", "", "X-Forwarded-For", "203.0.113.1", "X-Forwarded-For", "10.0.0.1")
	if r.RemoteAddr != ratelimittest.DefaultRemoteAddr || r.Method != "POST" || len(r.Header.Values("X-Forwarded-For")) != 2 {
		t.Fatalf("%+v", r)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("odd header arguments must panic")
		}
	}()
	//lint:ignore SA5012 the odd count is what this test checks
	ratelimittest.NewRequest("GET", "/", "", "X-Only-Name")
}

func TestExpectLimitedAtAndParse(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	h := ratelimit.New(ratelimit.PerMinute(4), ratelimit.ByIP(), ratelimit.WithName("api"), ratelimit.WithClock(clock))(http.NotFoundHandler())
	resp := ratelimittest.ExpectLimitedAt(t, h, 5, func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") })
	rl, err := ratelimittest.ParseRateLimit(resp.Header)
	if err != nil || rl != (ratelimittest.RateLimit{Policy: "api", Remaining: 0, Reset: 15 * time.Second}) {
		t.Fatalf("ParseRateLimit: %+v, %v", rl, err)
	}
	ps, err := ratelimittest.ParsePolicies(resp.Header)
	if err != nil || len(ps) != 1 || ps[0] != (ratelimittest.Policy{Name: "api", Quota: 4, Window: time.Minute}) {
		t.Fatalf("ParsePolicies: %+v, %v", ps, err)
	}
	// A helper that cannot fail is no helper: check it reports mismatches.
	ft := &fakeTB{TB: t}
	other := ratelimit.New(ratelimit.PerMinute(4), ratelimit.ByIP(), ratelimit.WithClock(clock))(http.NotFoundHandler())
	func() {
		defer func() { recover() }()
		ratelimittest.ExpectLimitedAt(ft, other, 3, func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") })
	}()
	if ft.failed != "ratelimittest: none of 3 requests was limited, want request 3 to be" {
		t.Fatalf("ExpectLimitedAt on a later limit reported %q", ft.failed)
	}
}

func TestParseErrors(t *testing.T) {
	for _, v := range []string{`default;r=1;t=2`, `"d";r=x;t=2`, `"d";t=2`} { // r is required, t optional
		h := http.Header{"Ratelimit": {v}}
		if _, err := ratelimittest.ParseRateLimit(h); err == nil {
			t.Errorf("ParseRateLimit(%q) accepted", v)
		}
	}
	if _, err := ratelimittest.ParsePolicies(http.Header{}); err == nil {
		t.Error("ParsePolicies of no field accepted")
	}
}

// fakeTB records a Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	panic("fatal")
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic("fatal")
}

func TestKeyRecorder(t *testing.T) {
	var kr ratelimittest.KeyRecorder
	if _, _, ok := kr.Last(); ok || kr.Len() != 0 {
		t.Fatal("a new recorder has seen keys")
	}
	h := ratelimit.New(ratelimit.PerMinute(10), kr.Wrap(ratelimit.ByClientIP("10.0.0.0/8")))(http.NotFoundHandler())
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.1.2.3:5000", "X-Forwarded-For", "198.51.100.20, 203.0.113.7"))
	if k, err, ok := kr.Last(); !ok || err != nil || k != "203.0.113.7" || kr.Len() != 1 {
		t.Fatalf("behind a trusted proxy: %q, %v, %v", k, err, ok)
	}
}

func TestKeyRecorderMustLast(t *testing.T) {
	var kr ratelimittest.KeyRecorder
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		kr.MustLast(ft)
	}()
	if ft.failed == "" {
		t.Fatal("MustLast on a recorder that saw nothing did not fail")
	}
}

// TestZeroFailingStoreIsAnOutage: a FailingStore without Err fails every
// call, so that a limiter treats it as a store that is down (its failure
// policy applies: 503 under fail closed (503), 200 under the default
// fail open), never as a limit that denies.
func TestZeroFailingStoreIsAnOutage(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for policy, want := range map[string]int{"fail-open": http.StatusOK, "fail-closed": http.StatusServiceUnavailable} {
		p := ratelimit.FailurePolicy{}
		if policy == "fail-closed" {
			p = ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}
		}
		h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), OnStoreError: p}}, ratelimit.WithStore(ratelimittest.FailingStore{}))(ok)
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != want {
			t.Errorf("%s: status %d, want %d", policy, resp.Code, want)
		}
	}
	var s ratelimittest.FailingStore
	if _, err := s.Take(context.Background(), stores.Request{}); err == nil {
		t.Error("Take: nil error")
	}
	if err := s.TakeAll(context.Background(), nil, nil); err == nil {
		t.Error("TakeAll: nil error")
	}
	if err := s.Return(context.Background(), stores.Request{}); err == nil {
		t.Error("Return: nil error")
	}
}

// TestParseRateLimitOfConcurrency: a Concurrency rule's member has r and no
// t (the draft makes t optional), and parses with Reset zero.
func TestParseRateLimitOfConcurrency(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Key: ratelimit.Global(), Name: "inflight", Algorithm: ratelimit.Concurrency}})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rl, err := ratelimittest.ParseRateLimit(ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Header)
	if want := (ratelimittest.RateLimit{Policy: "inflight", Remaining: 2}); err != nil || rl != want {
		t.Fatalf("ParseRateLimit: %+v, %v; want %+v", rl, err, want)
	}
}
