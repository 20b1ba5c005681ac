package ratelimitgin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestConformance runs the adapter suite with the middleware in r.Use of
// a gin.Engine without gin's recovery middleware.
func TestConformance(t *testing.T) {
	ratelimittest.TestAdapter(t, ratelimittest.Adapter{
		Router: func(l *ratelimit.Limiter, routes ...ratelimittest.Route) http.Handler {
			r := gin.New()
			r.Use(ratelimitgin.Middleware(l))
			for _, rt := range routes {
				r.Handle(rt.Method, strings.ReplaceAll(rt.Pattern, "{id}", ":id"), gin.WrapH(rt.Handler))
			}
			return r
		},
		ByRoute: ratelimitgin.ByRoute(),
	})
}
