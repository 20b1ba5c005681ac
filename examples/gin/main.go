// Command gin serves a gin app limited with github.com/sluicehq/ratelimit: a
// global limit per client, a tighter limit on POST /login, and a
// per-client, per-route limit on the /api group.
//
//	go run ./examples/gin            # from the repository root
//	go run ./examples/gin -addr localhost:9000
package main

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

func main() {
	appserver.Main("gin", "localhost:8082", newHandler())
}

// newHandler returns the app with its limits.
func newHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Logger(), gin.Recovery())

	// Global: 30 requests a minute per client IP, on every route. /healthz
	// is carved out by default. ratelimit.ByIP keys by the connecting peer;
	// behind a proxy use ratelimit.ByClientIP(trustedProxies...), not gin's
	// c.ClientIP().
	r.Use(ratelimitgin.New(ratelimit.PerMinute(30), ratelimit.ByIP(), ratelimit.WithName("global")))

	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello from gin\n") })
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })

	// Per route: 3 login attempts a minute per client IP.
	r.POST("/login",
		ratelimitgin.New(ratelimit.PerMinute(3), ratelimit.ByIP(), ratelimit.WithName("login")),
		func(c *gin.Context) { c.String(http.StatusOK, "welcome\n") })

	// Per group, per route: 5 requests a minute per client and route;
	// /api/users/1 and /api/users/2 share the /api/users/:id bucket.
	api := r.Group("/api", ratelimitgin.New(ratelimit.PerMinute(5),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()), ratelimit.WithName("api")))
	api.GET("/users/:id", func(c *gin.Context) { c.String(http.StatusOK, "user %s\n", c.Param("id")) })
	api.GET("/items/:id", func(c *gin.Context) { c.String(http.StatusOK, "item %s\n", c.Param("id")) })

	return r
}
