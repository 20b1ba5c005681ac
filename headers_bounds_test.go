package ratelimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestLongPolicyNameDenialFormatsHeaders: a policy name that fills the
// fields' formatting buffer exactly still gets a well-formed denial (this
// once indexed one byte past the buffer and panicked on Retry-After).
func TestLongPolicyNameDenialFormatsHeaders(t *testing.T) {
	for _, n := range []int{1, 61, 62, 63, 64} {
		name := strings.Repeat("a", n)
		h := ratelimit.New(ratelimit.PerSecond(1), ratelimit.ByIP(), ratelimit.WithName(name),
			ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())))(http.NotFoundHandler())
		for i, want := range []int{http.StatusNotFound, http.StatusTooManyRequests} {
			code, _, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
			if p != nil {
				t.Fatalf("name of %d bytes, request %d panicked: %v", n, i+1, p)
			}
			if code != want {
				t.Fatalf("name of %d bytes, request %d: status %d, want %d", n, i+1, code, want)
			}
		}
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		rl, err := ratelimittest.ParseRateLimit(resp.Header)
		if err != nil || rl.Policy != name || rl.Remaining != 0 || rl.Reset != time.Second {
			t.Errorf("name of %d bytes: RateLimit %+v, %v", n, rl, err)
		}
		if got := resp.Header.Get("Retry-After"); got != "1" {
			t.Errorf("name of %d bytes: Retry-After %q, want 1", n, got)
		}
	}
}

// TestExtremeLimitFieldsStayInRange: the largest limit the validator
// accepts (2^31-1 per fifty years) is reported with well-formed,
// non-negative fields.
func TestExtremeLimitFieldsStayInRange(t *testing.T) {
	const maxC = 1<<31 - 1
	fifty := 50 * 365 * 24 * time.Hour
	lim := ratelimit.Limit{Rate: maxC, Period: fifty, Burst: maxC}
	if err := lim.Validate(); err != nil {
		t.Fatalf("%v rejected: %v", lim, err)
	}
	h := ratelimit.New(lim, ratelimit.ByIP(), ratelimit.WithHeaders(ratelimit.HeadersIETF|ratelimit.HeadersLegacy),
		ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())))(http.NotFoundHandler())
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	if resp.Code != http.StatusNotFound {
		t.Fatalf("status %d", resp.Code)
	}
	rl, err := ratelimittest.ParseRateLimit(resp.Header)
	if err != nil || rl.Remaining != maxC-1 || rl.Reset < 0 {
		t.Errorf("RateLimit %+v, %v (field %q)", rl, err, resp.Header.Get("RateLimit"))
	}
	pols, err := ratelimittest.ParsePolicies(resp.Header)
	if err != nil || len(pols) != 1 || pols[0].Quota != maxC || pols[0].Window <= 0 {
		t.Errorf("RateLimit-Policy %+v, %v (field %q)", pols, err, resp.Header.Get("RateLimit-Policy"))
	}
	for _, f := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if n, err := strconv.ParseInt(resp.Header.Get(f), 10, 64); err != nil || n < 0 {
			t.Errorf("%s = %q: want a non-negative integer", f, resp.Header.Get(f))
		}
	}
}
