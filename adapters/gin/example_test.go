package ratelimitgin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// A global limit on the engine, a per-client, per-route limit on a group and
// a tighter limit on one route.
func Example() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()

	// Global: 100 requests a minute per client.
	r.Use(ratelimitgin.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
		ratelimit.WithName("global")))

	// Group: 30 requests a minute per client and route; /api/users/1 and
	// /api/users/2 share the /api/users/:id bucket.
	api := r.Group("/api", ratelimitgin.New(ratelimit.PerMinute(30),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()),
		ratelimit.WithName("api")))
	api.GET("/users/:id", func(c *gin.Context) { c.String(http.StatusOK, "user %s", c.Param("id")) })

	// Route: 2 login attempts a minute per client.
	r.POST("/login", ratelimitgin.New(ratelimit.PerMinute(2), ratelimit.ByIP(),
		ratelimit.WithName("login")), func(c *gin.Context) { c.String(http.StatusOK, "welcome") })

	// Each limiter a request passes reports its own policy in RateLimit.
	for range 3 {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
		fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/users/7", nil))
	fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	// Output:
	// 200 "global";r=99;t=1, "login";r=1;t=30
	// 200 "global";r=98;t=1, "login";r=0;t=30
	// 429 "global";r=97;t=1, "login";r=0;t=30
	// 200 "global";r=96;t=1, "api";r=29;t=2
}

// ByRoute keys by the gin route, so that every route has its own bucket
// while the paths of one route share it.
func ExampleByRoute() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(ratelimitgin.New(ratelimit.PerMinute(1), ratelimitgin.ByRoute()))
	r.GET("/users/:id", func(c *gin.Context) {})
	r.GET("/items/:id", func(c *gin.Context) {})
	for _, path := range []string{"/users/1", "/users/2", "/items/1"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /users/1 200
	// /users/2 429
	// /items/1 200
}

// One limiter shared by two routes: they count against the same buckets.
func ExampleMiddleware() {
	gin.SetMode(gin.ReleaseMode)
	shared := ratelimitgin.Middleware(ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP()))
	r := gin.New()
	r.GET("/a", shared, func(c *gin.Context) {})
	r.GET("/b", shared, func(c *gin.Context) {})
	for _, path := range []string{"/a", "/b"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /a 200
	// /b 429
}

// A DenyHandler renders denials in the application's own JSON format; the
// rate-limit fields and Retry-After are already set.
func ExampleNewWithConfig() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(ratelimitgin.NewWithConfig(ratelimitgin.Config{
		Limit: ratelimit.PerMinute(1),
		Key:   ratelimit.ByIP(),
		// A clock that stands still, for the output below.
		Options: []ratelimit.Option{ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch()))},
		DenyHandler: func(c *gin.Context, v *ratelimit.Verdict) {
			c.JSON(http.StatusTooManyRequests, gin.H{
				"error":       "rate_limited",
				"retry_in_ms": v.Result().RetryAfter.Milliseconds(),
			})
		},
	}))
	r.GET("/items", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"items": []string{}}) })
	for range 2 {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// 200  {"items":[]}
	// 429 60 {"error":"rate_limited","retry_in_ms":60000}
}
