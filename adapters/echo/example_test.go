package ratelimitecho_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echo"
)

// A global limit with e.Use, a per-client, per-route limit on a group and a
// tighter limit on one route.
func Example() {
	e := echo.New()

	// Global: 100 requests a minute per client.
	e.Use(ratelimitecho.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
		ratelimit.WithName("global")))

	// Group: 30 requests a minute per client and route; /api/users/1 and
	// /api/users/2 share the /api/users/:id bucket.
	api := e.Group("/api", ratelimitecho.New(ratelimit.PerMinute(30),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()),
		ratelimit.WithName("api")))
	api.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "user "+c.Param("id")) })

	// Route: 2 login attempts a minute per client.
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome") },
		ratelimitecho.New(ratelimit.PerMinute(2), ratelimit.ByIP(), ratelimit.WithName("login")))

	// Each limiter a request passes reports its own policy in RateLimit.
	for range 3 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
		fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/users/7", nil))
	fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	// Output:
	// 200 "global";r=99;t=1, "login";r=1;t=30
	// 200 "global";r=98;t=1, "login";r=0;t=30
	// 429 "global";r=97;t=1, "login";r=0;t=30
	// 200 "global";r=96;t=1, "api";r=29;t=2
}

// NewWithConfig with echo's conventions: a Skipper, a denial rendered by
// echo's HTTPErrorHandler with the limiter's fields, and a store failure
// turned into a 503 (fail closed).
func ExampleNewWithConfig() {
	e := echo.New()
	e.GET("/search", func(c echo.Context) error { return c.String(http.StatusOK, "results") },
		ratelimitecho.NewWithConfig(ratelimitecho.Config{
			// Skip callers an earlier middleware authenticated as internal.
			Skipper: func(c echo.Context) bool { return c.Get("internal") == true },
			Limit:   ratelimit.PerMinute(1),
			Key:     ratelimit.ByIP(),
			DenyHandler: func(c echo.Context, v *ratelimit.Verdict) error {
				return echo.NewHTTPError(http.StatusTooManyRequests, "slow down")
			},
			ErrorHandler: func(c echo.Context, err error) error {
				return echo.NewHTTPError(http.StatusServiceUnavailable).SetInternal(err)
			},
		}))
	for range 2 {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/search", nil))
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200  results
	// 429 60 {"message":"slow down"}
}

// ByRoute keys by the echo route, so that every route has its own bucket
// while the paths of one route share it.
func ExampleByRoute() {
	e := echo.New()
	e.Use(ratelimitecho.New(ratelimit.PerMinute(1), ratelimitecho.ByRoute()))
	e.GET("/users/:id", func(c echo.Context) error { return nil })
	e.GET("/items/:id", func(c echo.Context) error { return nil })
	for _, path := range []string{"/users/1", "/users/2", "/items/1"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /users/1 200
	// /users/2 429
	// /items/1 200
}
