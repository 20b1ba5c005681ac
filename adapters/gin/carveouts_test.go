package ratelimitgin_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// carveOutPaths are the default carve-outs and one next to a parameter
// route (gin refuses a catch-all beside a static segment); NoRoute is the
// catch-all.
var carveOutPaths = append(ratelimit.DefaultCarveOuts(), "/public/status")

func servedBy(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header(ratelimittest.ServedBy, name)
		c.String(http.StatusOK, name)
	}
}

// exhaustible is 2 requests an hour for all clients together, reporting to
// p, on a clock that stands still.
func exhaustible(p *ratelimittest.CarveOutProber) gin.HandlerFunc {
	return ratelimitgin.New(ratelimit.PerHour(2), ratelimit.Global(), clock(),
		ratelimit.WithCarveOuts(carveOutPaths...), ratelimit.WithObserver(p))
}

func TestCarveOutsNeverBypassGin(t *testing.T) {
	engines := map[string]func(*gin.Engine){
		"defaults": func(*gin.Engine) {},
		"lenient": func(r *gin.Engine) {
			r.RedirectFixedPath = true
			r.RemoveExtraSlash = true
			r.UseRawPath = true
			r.HandleMethodNotAllowed = true
		},
	}
	for name, configure := range engines {
		t.Run(name, func(t *testing.T) {
			p := new(ratelimittest.CarveOutProber)
			r := gin.New()
			configure(r)
			r.Use(exhaustible(p))
			for _, path := range carveOutPaths {
				r.GET(path, servedBy(path))
			}
			r.GET("/public/:file", servedBy("/public/"))
			r.HEAD("/public/:file", servedBy("/public/"))
			r.GET("/static/*file", servedBy("/static/"))
			r.POST("/metrics", servedBy("POST /metrics"))
			r.NoRoute(servedBy("NoRoute"))
			r.NoMethod(servedBy("NoMethod"))
			skipped := p.Check(t, r, carveOutPaths...)
			if skipped[ratelimittest.Probe{Method: "HEAD", Target: "/healthz"}] {
				t.Error("HEAD /healthz skipped: gin has no HEAD route for it")
			}
		})
	}
}

func TestDenyHandlerRendersGinJSON(t *testing.T) {
	var sawNext bool
	r := gin.New()
	r.Use(ratelimitgin.NewWithConfig(ratelimitgin.Config{
		Limit:   ratelimit.PerMinute(1),
		Key:     ratelimit.ByIP(),
		Options: []ratelimit.Option{clock(), ratelimit.WithName("api")},
		DenyHandler: func(c *gin.Context, v *ratelimit.Verdict) {
			c.JSON(http.StatusTooManyRequests, gin.H{"error": "rate_limited", "rule": v.Rule(), "retry_in_ms": v.Result().RetryAfter.Milliseconds()})
		},
	}))
	r.GET("/x", func(c *gin.Context) { sawNext = true; ok(c) })
	if resp := ratelimittest.Get(r, "/x"); resp.Code != http.StatusOK {
		t.Fatalf("first request: %d", resp.Code)
	}
	sawNext = false
	resp := ratelimittest.Get(r, "/x")
	var body struct {
		Error     string `json:"error"`
		Rule      string `json:"rule"`
		RetryInMs int64  `json:"retry_in_ms"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	if resp.Code != http.StatusTooManyRequests || body.Error != "rate_limited" || body.Rule != "api" || body.RetryInMs != 60000 {
		t.Fatalf("%d %+v", resp.Code, body)
	}
	if resp.Header.Get("Retry-After") != "60" || resp.Header.Get("RateLimit") == "" || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("headers %v", resp.Header)
	}
	if sawNext {
		t.Fatal("the next handler ran after a denial")
	}
}

func TestDenyHandlerCostsNoAllocation(t *testing.T) {
	if !poolsReliable() {
		t.Skip("the race detector empties sync.Pools at random: allocation counts say nothing")
	}
	r := gin.New()
	r.Use(ratelimitgin.NewWithConfig(ratelimitgin.Config{
		Limit: ratelimit.PerSecond(1e6), Key: ratelimit.ByIP(),
		DenyHandler: func(c *gin.Context, v *ratelimit.Verdict) { c.Status(http.StatusTooManyRequests) },
	}))
	r.GET("/x", ok)
	plain := gin.New()
	plain.Use(ratelimitgin.New(ratelimit.PerSecond(1e6), ratelimit.ByIP()))
	plain.GET("/x", ok)
	req := ratelimittest.NewRequest("GET", "/x", "192.0.2.1:1")
	w := ratelimittest.NewDiscardWriter()
	with := testing.AllocsPerRun(200, func() { w.Reset(); r.ServeHTTP(w, req) })
	without := testing.AllocsPerRun(200, func() { w.Reset(); plain.ServeHTTP(w, req) })
	if with > without {
		t.Fatalf("allowed request with a DenyHandler: %.1f allocations, without: %.1f", with, without)
	}
}

func TestCarveOutWithoutItsRouteIsLimited(t *testing.T) {
	p := new(ratelimittest.CarveOutProber)
	r := gin.New()
	r.Use(exhaustible(p))
	r.NoRoute(servedBy("NoRoute")) // an SPA fallback; no /healthz route
	for range 3 {
		ratelimittest.Get(r, "/api")
	}
	for _, m := range []string{"GET", "HEAD"} {
		resp := ratelimittest.Do(r, ratelimittest.NewRequest(m, "/healthz", ""))
		if !resp.Limited() {
			t.Errorf("%s /healthz: status %d served by %q: skipped though no route serves it", m, resp.Code, resp.Header.Get(ratelimittest.ServedBy))
		}
	}
}

// poolsReliable reports whether a sync.Pool hands back what was put in it,
// which is not so under the race detector.
func poolsReliable() bool {
	p := sync.Pool{New: func() any { return new([64]byte) }}
	return testing.AllocsPerRun(10, func() {
		for range 100 {
			p.Put(p.Get())
		}
	}) == 0
}
