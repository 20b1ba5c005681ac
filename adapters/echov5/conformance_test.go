package ratelimitecho_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echov5"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestConformance runs the adapter suite with the middleware in e.Use,
// without echo's recover middleware.
func TestConformance(t *testing.T) {
	ratelimittest.TestAdapter(t, ratelimittest.Adapter{
		Router: func(l *ratelimit.Limiter, routes ...ratelimittest.Route) http.Handler {
			e := echo.New()
			e.Use(ratelimitecho.Middleware(l))
			for _, rt := range routes {
				e.Add(rt.Method, strings.ReplaceAll(rt.Pattern, "{id}", ":id"), echo.WrapHandler(rt.Handler))
			}
			return e
		},
		ByRoute: ratelimitecho.ByRoute(),
	})
}
