package ratelimitclient

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestThrottleRetryAfterBringsSpentQuotaResetForward: a throttle whose
// fields report the quota spent, and whose Retry-After is sooner than their
// reset (read from whole seconds, the reset can be a second late), makes
// the Retry-After the policy's reset, and gives the sends waiting on the
// later one their slots again (when the policy's window is known). Nothing
// else does: a Retry-After later than the reset, a quota not spent, a
// response that is no throttle, or a throttle without Retry-After.
func TestThrottleRetryAfterBringsSpentQuotaResetForward(t *testing.T) {
	const policy10 = `"default";q=10;w=60`
	cases := []struct {
		name              string
		status            int
		rateLimit, policy string
		retryAfter        string
		throttled         bool
		reset, blocked    time.Duration // from the response, in the policy and partition after it
		moved             bool          // a send waiting for a slot an hour away got another
	}{
		{"429 Retry-After before the reset", 429, `"default";r=0;t=30`, policy10, "5", true, 5 * time.Second, 5 * time.Second, true},
		{"429 Retry-After after the reset", 429, `"default";r=0;t=30`, policy10, "40", true, 30 * time.Second, 40 * time.Second, false},
		{"429 Retry-After at the reset", 429, `"default";r=0;t=30`, policy10, "30", true, 30 * time.Second, 30 * time.Second, false},
		{"429 quota not spent", 429, `"default";r=3;t=30`, policy10, "5", true, 30 * time.Second, 5 * time.Second, false},
		{"429 without Retry-After", 429, `"default";r=0;t=30`, policy10, "", true, 30 * time.Second, time.Second, false},
		{"429 window unknown", 429, `"default";r=0;t=30`, "", "5", true, 5 * time.Second, 5 * time.Second, false},
		{"503 Retry-After before the reset", 503, `"default";r=0;t=30`, policy10, "5", true, 5 * time.Second, 5 * time.Second, true},
		{"403 Retry-After before the reset", 403, `"default";r=0;t=30`, policy10, "5", true, 5 * time.Second, 5 * time.Second, true},
		{"403 without Retry-After", 403, `"default";r=0;t=30`, policy10, "", false, 30 * time.Second, 0, false},
		{"200 with Retry-After", 200, `"default";r=0;t=30`, policy10, "5", false, 30 * time.Second, 0, false},
		{"429 window begun with the request, Retry-After before it ends", 429, `"default";r=0;t=30`, `"default";q=1;w=10`, "5", true, 5 * time.Second, 5 * time.Second, true},
		{"429 window begun with the request, Retry-After after it ends", 429, `"default";r=0;t=30`, `"default";q=1;w=10`, "20", true, 10 * time.Second, 20 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Alone, the response sets the reset and the block.
				p, now, throttled := throttleResponse(c.status, c.rateLimit, c.policy, c.retryAfter, false)
				if throttled != c.throttled {
					t.Errorf("throttle: %v, want %v", throttled, c.throttled)
				}
				if len(p.policies) != 1 {
					t.Fatalf("%d policies, want 1", len(p.policies))
				}
				if got := p.policies[0].resetAt.sub(now); got != c.reset {
					t.Errorf("reset in %v, want %v", got, c.reset)
				}
				if got := max(p.blocked.sub(now), 0); got != c.blocked {
					t.Errorf("blocked for %v, want %v", got, c.blocked)
				}
				// With a send waiting, it may give it another slot.
				p, now, _ = throttleResponse(c.status, c.rateLimit, c.policy, c.retryAfter, true)
				if moved := p.waiters[0].slot != now.add(time.Hour); moved != c.moved {
					t.Errorf("waiting send given another slot: %v, want %v (slot in %v)", moved, c.moved, p.waiters[0].slot.sub(now))
				}
			})
		})
	}
}

// throttleResponse applies to a new partition the response to its first
// send, of status with the RateLimit, RateLimit-Policy and Retry-After
// fields given (when not empty), with a second send admitted since, and
// waiting for a slot an hour away when waiting is set. It returns the
// partition and the time the response was received at, which is the time
// still (the caller runs it in a synctest bubble).
func throttleResponse(status int, rateLimit, policy, retryAfter string, waiting bool) (*partition, mono, bool) {
	tr := &Transport{}
	tr.init()
	req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
	p := tr.partition(req)
	now := tr.now()
	p.count.Store(2)
	if waiting {
		p.mu.Lock()
		p.addWaiter(2, now.add(time.Hour))
		p.mu.Unlock()
	}
	h := http.Header{}
	for _, f := range [...][2]string{{"RateLimit", rateLimit}, {"RateLimit-Policy", policy}, {"Retry-After", retryAfter}} {
		if f[1] != "" {
			h.Set(f[0], f[1])
		}
	}
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
	throttled := tr.update(p, resp, 1, 0, 0)
	return p, now, throttled
}
