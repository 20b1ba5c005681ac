package ratelimitclient_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// TestConcurrentRequestsPolicyIsNotPaced: a RateLimit member of a policy
// whose quota unit is "concurrent-requests" says how many more requests may
// be in flight, not how many may be sent before a reset, so the Transport
// does not space sends by it, even when the member carries a t (the slot
// lifetime, as servers before issue #27 sent). One request at a time, six
// go out at once; a rate policy in the same field is still obeyed, and so
// is a malformed policy field (ignored: nothing is dropped).
func TestConcurrentRequestsPolicyIsNotPaced(t *testing.T) {
	for _, c := range []struct {
		name, policy, rateLimit string
		wantWait                bool
	}{
		{"concurrency", `"inflight";q=2;qu="concurrent-requests"`, `"inflight";r=1;t=60`, false},
		{"concurrency beside a rate", `"rate";q=2;w=60, "inflight";q=2;qu="concurrent-requests"`, `"inflight";r=0;t=60, "rate";r=1;t=60`, true},
		{"requests unit", `"inflight";q=2;qu="requests"`, `"inflight";r=1;t=60`, true},
		{"unit as a token", `"inflight";q=2;qu=concurrent-requests`, `"inflight";r=1;t=60`, true},
		{"malformed policy", `"inflight";q=2;qu="concurrent-requests",`, `"inflight";r=1;t=60`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: always(http.StatusOK, "RateLimit-Policy", c.policy, "RateLimit", c.rateLimit)}
				tr := &ratelimitclient.Transport{Base: base}
				start := time.Now()
				for range 6 {
					send(tr, get("http://api.test/"))
				}
				if waited := time.Since(start) > 0; waited != c.wantWait {
					t.Errorf("six sequential requests took %v; want a wait: %v", time.Since(start), c.wantWait)
				}
			})
		})
	}
}
