package ratelimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// TestSlidingLogLargerThanItsBoundIsRefusedAtConstruction: a sliding log
// keeps a timestamp per event, so a Rate above 10,000 is refused when the
// rule is built, with a message that says why and what to use instead; a
// Rate at the bound is built.
func TestSlidingLogLargerThanItsBoundIsRefusedAtConstruction(t *testing.T) {
	build := func(rate int) (msg string) {
		defer func() {
			if p := recover(); p != nil {
				msg = fmt.Sprint(p)
			}
		}()
		ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "log", Limit: ratelimit.PerMinute(rate), Key: ratelimit.Global(), Algorithm: ratelimit.SlidingLog}})
		return ""
	}
	if msg := build(10_000); msg != "" {
		t.Fatalf("10,000 per minute refused: %s", msg)
	}
	msg := build(10_001)
	for _, want := range []string{"ratelimit:", "sliding-log", "10001", "10000", "GCRA"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("10,001 per minute: panic %q; want a message containing %q", msg, want)
		}
	}
	req := stores.Request{Key: "k", Limit: ratelimit.PerMinute(10_001), Algorithm: ratelimit.SlidingLog, Cost: 1}
	if err := req.Validate(); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Fatalf("Validate of 10,001 per minute = %v; want ErrInvalidLimit", err)
	}
}

// TestSlidingLogFieldsSayWhenTheOldestEventLeaves: under PerMinute(3) with
// requests 10s apart, t is when the oldest event in the window leaves (the
// next unit back), a denial's t and Retry-After are the same, and this holds
// alone (the direct path) and beside another rule (the general path).
func TestSlidingLogFieldsSayWhenTheOldestEventLeaves(t *testing.T) {
	want := []struct {
		code      int
		rateLimit string
		retry     string
	}{
		{200, `"log";r=2;t=60`, ""},
		{200, `"log";r=1;t=50`, ""},
		{200, `"log";r=0;t=40`, ""},
		{429, `"log";r=0;t=30`, "30"},
		{429, `"log";r=0;t=20`, "20"},
		{429, `"log";r=0;t=10`, "10"},
		{200, `"log";r=0;t=10`, ""}, // +60s: the first left; the second leaves at +70s
	}
	log := ratelimit.Rule{Name: "log", Limit: ratelimit.PerMinute(3), Algorithm: ratelimit.SlidingLog, Key: ratelimit.Global()}
	for _, rules := range [][]ratelimit.Rule{
		{log},
		{log, {Name: "wide", Limit: ratelimit.PerMinute(1000), Key: ratelimit.Global()}},
	} {
		clock := ratelimittest.NewClock(ratelimittest.Epoch())
		h := ratelimit.NewRules(rules, ratelimit.WithClock(clock))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i, w := range want {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if got := rec.Header().Get("RateLimit"); rec.Code != w.code || got != w.rateLimit || rec.Header().Get("Retry-After") != w.retry {
				t.Errorf("%d rules, request %d at +%v: %d RateLimit %q Retry-After %q; want %d %q %q", len(rules), i+1,
					clock.Now().Sub(ratelimittest.Epoch()), rec.Code, got, rec.Header().Get("Retry-After"), w.code, w.rateLimit, w.retry)
			}
			clock.Advance(10 * time.Second)
		}
	}
}
