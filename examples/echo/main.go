// Command echo serves an echo app limited with github.com/sluicehq/ratelimit:
// a global limit per client, a tighter limit on POST /login, and a
// per-client, per-route limit on the /api group that fails closed when the
// store fails.
//
//	go run ./examples/echo           # from the repository root
//	go run ./examples/echo -addr localhost:9000
package main

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echo"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

func main() {
	appserver.Main("echo", "localhost:8083", newHandler())
}

// newHandler returns the app with its limits.
func newHandler() http.Handler {
	e := echo.New()
	e.HideBanner = true
	e.Use(middleware.Recover())

	// Global: 30 requests a minute per client IP, on every route. /healthz
	// is carved out by default. ratelimit.ByIP keys by the connecting peer;
	// behind a proxy use ratelimit.ByClientIP(trustedProxies...), not
	// c.RealIP().
	e.Use(ratelimitecho.New(ratelimit.PerMinute(30), ratelimit.ByIP(), ratelimit.WithName("global")))

	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello from echo\n") })
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })

	// Per route: 3 login attempts a minute per client IP.
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome\n") },
		ratelimitecho.New(ratelimit.PerMinute(3), ratelimit.ByIP(), ratelimit.WithName("login")))

	// Per group, per route: 5 requests a minute per client and route;
	// /api/users/1 and /api/users/2 share the /api/users/:id bucket. A store
	// failure becomes echo's 503 instead of letting requests through.
	api := e.Group("/api", ratelimitecho.NewWithConfig(ratelimitecho.Config{
		Limit:   ratelimit.PerMinute(5),
		Key:     ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()),
		Options: []ratelimit.Option{ratelimit.WithName("api")},
		ErrorHandler: func(c echo.Context, err error) error {
			return echo.NewHTTPError(http.StatusServiceUnavailable).SetInternal(err)
		},
	}))
	api.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "user "+c.Param("id")+"\n") })
	api.GET("/items/:id", func(c echo.Context) error { return c.String(http.StatusOK, "item "+c.Param("id")+"\n") })

	return e
}
