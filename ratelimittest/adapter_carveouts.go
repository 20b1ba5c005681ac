package ratelimittest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// exhaustedRoute serves GET /ratelimittest-exhausted, the request
// CarveOutProber.Check exhausts the limit with.
func exhaustedRoute(hs *handlers) Route {
	return Route{"GET", "/ratelimittest-exhausted", hs.named("/ratelimittest-exhausted")}
}

func (a Adapter) testCarveOuts(t *testing.T) {
	limiter := func(p *CarveOutProber) *ratelimit.Limiter {
		return ratelimit.NewLimiter(ratelimit.PerHour(2), ratelimit.Global(), still(), ratelimit.WithObserver(p))
	}
	t.Run("GetRoutes", func(t *testing.T) {
		var hs handlers
		routes := []Route{exhaustedRoute(&hs), {"POST", "/metrics", hs.named("POST /metrics")}}
		for _, path := range ratelimit.DefaultCarveOuts() {
			routes = append(routes, Route{"GET", path, hs.named(path)})
		}
		p := new(CarveOutProber)
		skipped := p.Check(t, a.Router(limiter(p), routes...), ratelimit.DefaultCarveOuts()...)
		if skipped[Probe{"HEAD", "/healthz"}] {
			t.Error("HEAD /healthz was carved out with no HEAD route")
		}
	})
	t.Run("HeadRoute", func(t *testing.T) {
		var hs handlers
		p := new(CarveOutProber)
		h := a.Router(limiter(p), exhaustedRoute(&hs),
			Route{"GET", "/healthz", hs.named("/healthz")}, Route{"HEAD", "/healthz", hs.named("/healthz")})
		if skipped := p.Check(t, h, "/healthz"); !skipped[Probe{"HEAD", "/healthz"}] {
			t.Error("HEAD /healthz was limited though its own HEAD route serves it")
		}
	})
	t.Run("PathServedByOtherRoute", func(t *testing.T) {
		var hs handlers
		h := a.Router(limiter(new(CarveOutProber)), Route{"GET", "/{id}", hs.named("/{id}")})
		ExpectLimitedAt(t, h, 3, gets("/work"))
		for _, path := range ratelimit.DefaultCarveOuts() {
			if resp := send(h, "GET", path); !resp.Limited() {
				t.Errorf("GET %s served by the route /{id}: %d, want 429 (no carve-out route serves it)", path, resp.Code)
			}
		}
	})
}

// compared are the fields TestAdapter compares with the core's.
var compared = []string{"RateLimit", "RateLimit-Policy", "Retry-After", "Cache-Control",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// testSameAsCore sends the same requests through the adapter and through
// the core middleware on a ServeMux, each limiter on its own clock moved
// alike, and compares status, the limiter's fields and the body (a
// problem body by its members).
func (a Adapter) testSameAsCore(t *testing.T) {
	styles := []ratelimit.HeaderStyle{ratelimit.HeadersIETF, ratelimit.HeadersIETF | ratelimit.HeadersLegacy}
	for _, style := range styles {
		var hs handlers
		clockA, clockB := NewClock(Epoch()), NewClock(Epoch())
		opts := func(c *Clock) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithClock(c), ratelimit.WithHeaders(style), ratelimit.WithName("same")}
		}
		mux := http.NewServeMux()
		mux.Handle("GET /x/{id}", hs.named("/x"))
		core := ratelimit.NewLimiter(ratelimit.PerMinute(3), ratelimit.ByIP(), opts(clockA)...).Handler(mux)
		adapted := a.Router(ratelimit.NewLimiter(ratelimit.PerMinute(3), ratelimit.ByIP(), opts(clockB)...),
			Route{"GET", "/x/{id}", hs.named("/x")})
		for i := range 8 {
			want, got := send(core, "GET", "/x/1"), send(adapted, "GET", "/x/1")
			if diff := responseDiff(want, got); diff != "" {
				t.Fatalf("headers %v, request %d: %s", style, i+1, diff)
			}
			clockA.Advance(7 * time.Second)
			clockB.Advance(7 * time.Second)
		}
	}
}

// responseDiff describes how got differs from want, or returns "".
func responseDiff(want, got *Response) string {
	if want.Code != got.Code {
		return fmt.Sprintf("status %d, core %d", got.Code, want.Code)
	}
	for _, f := range compared {
		if w, g := want.Header.Values(f), got.Header.Values(f); !reflect.DeepEqual(w, g) {
			return fmt.Sprintf("%s %q, core %q", f, g, w)
		}
	}
	if want.Code == http.StatusOK {
		if want.Body != got.Body {
			return fmt.Sprintf("body %q, core %q", got.Body, want.Body)
		}
		return ""
	}
	var w, g any
	if json.Unmarshal([]byte(want.Body), &w) != nil || json.Unmarshal([]byte(got.Body), &g) != nil || !reflect.DeepEqual(w, g) {
		return fmt.Sprintf("body %q, core %q", got.Body, want.Body)
	}
	return ""
}
