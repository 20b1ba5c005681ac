package ratelimitchi_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func handle(r chi.Router, routes []ratelimittest.Route) {
	for _, rt := range routes {
		r.Method(rt.Method, rt.Pattern, rt.Handler)
	}
}

// TestConformanceInGroup runs the adapter suite with the middleware in
// r.Use inside r.Group, after routing.
func TestConformanceInGroup(t *testing.T) {
	ratelimittest.TestAdapter(t, ratelimittest.Adapter{
		Router: func(l *ratelimit.Limiter, routes ...ratelimittest.Route) http.Handler {
			r := chi.NewRouter()
			r.Group(func(r chi.Router) {
				r.Use(ratelimitchi.Middleware(l))
				handle(r, routes)
			})
			return r
		},
		ByRoute: ratelimitchi.ByRoute(),
	})
}

// TestConformanceInTopLevelUse runs the adapter suite with the middleware
// in r.Use of the top router, before routing, where ByRoute has no pattern
// yet and the carve-outs ask the router which route it will match.
func TestConformanceInTopLevelUse(t *testing.T) {
	ratelimittest.TestAdapter(t, ratelimittest.Adapter{
		Router: func(l *ratelimit.Limiter, routes ...ratelimittest.Route) http.Handler {
			r := chi.NewRouter()
			r.Use(ratelimitchi.Middleware(l))
			handle(r, routes)
			return r
		},
	})
}
