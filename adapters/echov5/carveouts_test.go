package ratelimitecho_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echov5"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// carveOutPaths are the default carve-outs and one next to a catch-all.
var carveOutPaths = append(ratelimit.DefaultCarveOuts(), "/public/status")

func servedBy(name string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		c.Response().Header().Set(ratelimittest.ServedBy, name)
		return c.String(http.StatusOK, name)
	}
}

// exhaustible is 2 requests an hour for all clients together, reporting to
// p, on a clock that stands still. With a DenyHandler it goes through
// NewWithConfig's other path.
func exhaustible(p *ratelimittest.CarveOutProber, withConfig bool) echo.MiddlewareFunc {
	opts := []ratelimit.Option{clock(), ratelimit.WithCarveOuts(carveOutPaths...), ratelimit.WithObserver(p)}
	if !withConfig {
		return ratelimitecho.New(ratelimit.PerHour(2), ratelimit.Global(), opts...)
	}
	return ratelimitecho.NewWithConfig(ratelimitecho.Config{
		Limit: ratelimit.PerHour(2), Key: ratelimit.Global(), Options: opts,
		DenyHandler: func(c *echo.Context, v *ratelimit.Verdict) error {
			return c.NoContent(http.StatusTooManyRequests)
		},
	})
}

func TestCarveOutsNeverBypassEcho(t *testing.T) {
	apps := map[string]func(e *echo.Echo){
		"catch-all": func(e *echo.Echo) {
			e.Any("/*", servedBy("/*"))
			e.GET("/public/*", servedBy("/public/"))
		},
		"echo's 404 and 405": func(e *echo.Echo) {
			e.POST("/public/*", servedBy("POST /public/"))
		},
		"route not found": func(e *echo.Echo) {
			e.RouteNotFound("/*", servedBy("RouteNotFound"))
			e.RouteNotFound("/healthz", servedBy("RouteNotFound /healthz"))
			e.GET("/public/:file", servedBy("/public/"))
		},
	}
	for name, routes := range apps {
		for _, withConfig := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/DenyHandler=%v", name, withConfig), func(t *testing.T) {
				p := new(ratelimittest.CarveOutProber)
				e := echo.New()
				e.Use(exhaustible(p, withConfig))
				for _, path := range carveOutPaths {
					e.GET(path, servedBy(path))
				}
				e.POST("/metrics", servedBy("POST /metrics"))
				routes(e)
				skipped := p.Check(t, e, carveOutPaths...)
				if skipped[ratelimittest.Probe{Method: "HEAD", Target: "/healthz"}] {
					t.Error("HEAD /healthz skipped: echo has no HEAD route for it")
				}
			})
		}
	}
}

func TestCarveOutInGroup(t *testing.T) {
	p := new(ratelimittest.CarveOutProber)
	e := echo.New()
	g := e.Group("/svc", exhaustible(p, false))
	g.GET("/healthz", servedBy("/svc/healthz"))
	g.HEAD("/healthz", servedBy("/svc/healthz"))
	g.Any("/*", servedBy("/svc/*"))
	// The carve-out is the full route path: only exhaustible's paths count.
	for range 3 {
		ratelimittest.Get(e, "/svc/api")
	}
	for _, m := range []string{"GET", "HEAD"} {
		if resp := ratelimittest.Do(e, ratelimittest.NewRequest(m, "/svc/healthz", "")); !resp.Limited() {
			t.Errorf("%s /svc/healthz: %d, want limited (not a carve-out path)", m, resp.Code)
		}
	}
}

func TestCarveOutWithoutItsRouteIsLimited(t *testing.T) {
	p := new(ratelimittest.CarveOutProber)
	e := echo.New()
	e.Use(exhaustible(p, false))
	e.Any("/*", servedBy("/*")) // an SPA fallback; no /healthz route
	for range 3 {
		ratelimittest.Get(e, "/api")
	}
	for _, m := range []string{"GET", "HEAD"} {
		if resp := ratelimittest.Do(e, ratelimittest.NewRequest(m, "/healthz", "")); !resp.Limited() {
			t.Errorf("%s /healthz: status %d served by %q: skipped though no route serves it", m, resp.Code, resp.Header.Get(ratelimittest.ServedBy))
		}
	}
}
