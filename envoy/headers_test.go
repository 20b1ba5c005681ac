package envoy

import (
	"net/http/httptest"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func headerValue(hs []*core.HeaderValue, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// The fields the service asks Envoy to add are those the core's
// middleware writes for the same limit, algorithm and time: a client
// behind Envoy reads the same RateLimit, RateLimit-Policy and Retry-After
// as one behind the middleware.
func TestHeadersAreThoseTheMiddlewareWrites(t *testing.T) {
	const yaml = `domain: api
descriptors:
  - key: client
    rate_limit:
      name: per-client
      unit: minute
      requests_per_unit: 4
`
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(replayStart)
			svc, err := New(compileYAML(t, "api.yaml", yaml), memory.New(memory.WithClock(clock)), WithAlgorithm(alg))
			if err != nil {
				t.Fatal(err)
			}
			mw := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "per-client", Limit: ratelimit.PerMinute(4), Key: ratelimit.Global(), Algorithm: alg}},
				ratelimit.WithClock(clock), ratelimit.WithStore(memory.New(memory.WithClock(clock))))
			for i := range 9 {
				resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
				v := mw.Check(httptest.NewRequest("GET", "/", nil))
				h := httptest.NewRecorder().Header()
				v.SetHeaders(h)
				if h.Get(hdrRateLimit) == "" || h.Get(hdrPolicy) == "" {
					t.Fatalf("call %d: the middleware wrote no RateLimit fields: %v", i, h)
				}
				for _, key := range []string{hdrPolicy, hdrRateLimit, hdrRetryAfter} {
					if got, want := headerValue(resp.ResponseHeadersToAdd, key), h.Get(key); got != want {
						t.Errorf("call %d at %v: %s %q, the middleware writes %q", i, clock.Now().Sub(replayStart), key, got, want)
					}
				}
				clock.Advance(7 * time.Second)
			}
		})
	}
}

// With several limits the policy field lists every enforced one and
// RateLimit reports the one that denied; a shadow limit is not reported.
func TestHeadersReportTheDenyingLimitAmongSeveral(t *testing.T) {
	const yaml = `domain: api
descriptors:
  - key: client
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: path
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: soft
    shadow_mode: true
    rate_limit:
      unit: second
      requests_per_unit: 1
`
	svc, _ := newMemoryService(t, yaml)
	descs := [][]string{{"client", "a"}, {"path", "/x"}, {"soft", "s"}}
	mustCall(t, svc, request("api", descs, 2))
	resp := mustCall(t, svc, request("api", descs, 1))
	hs := resp.ResponseHeadersToAdd
	if got, want := headerValue(hs, hdrPolicy), `"api.client";q=2;w=60, "api.path";q=100;w=3600`; got != want {
		t.Errorf("policy %q, want %q", got, want)
	}
	if got, want := headerValue(hs, hdrRateLimit), `"api.client";r=0;t=30`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got := headerValue(hs, hdrRetryAfter); got != "30" {
		t.Errorf("Retry-After %q, want 30", got)
	}
}
