// Package ratelimitgin adapts github.com/sluicehq/ratelimit to gin-gonic/gin.
//
// New takes the same limits, key functions, stores and options as
// ratelimit.New and returns a gin.HandlerFunc. It runs the core limiter
// (ratelimit.Limiter.Admit): an allowed request gets the rate-limit fields
// and goes on down the chain; a denied one gets the core's 429 (the same
// fields, Retry-After, Cache-Control and RFC 9457 problem+json body) and the
// chain is aborted with c.Abort. Nothing about limiting is reimplemented here.
// (The middleware builds on ratelimit.Limiter.Admit, so Concurrency limits
// release their slot when the rest of the chain returns.)
//
// # Global, per-group and per-route limits
//
//	r := gin.New()
//	r.Use(ratelimitgin.New(ratelimit.PerMinute(600), ratelimit.ByIP()))   // everything
//	api := r.Group("/api", ratelimitgin.New(ratelimit.PerMinute(60),
//		ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()),
//		ratelimit.WithName("api")))                                          // a group, per route
//	api.GET("/users/:id", getUser)
//	r.POST("/login", ratelimitgin.New(ratelimit.PerMinute(5), ratelimit.ByIP(),
//		ratelimit.WithName("login")), login)                                 // one route
//
// Limits nest: a request to /login counts against the global limit and the
// login limit. Each New has its own in-process store unless given one with
// ratelimit.WithStore; limits sharing a store need distinct
// ratelimit.WithName values. To share one limiter between routes, build it
// once with ratelimit.NewLimiter and pass it to Middleware.
//
// # Route keys
//
// gin matches the route before it runs any handler, so c.FullPath() is known
// wherever the middleware is installed: engine, group or route. The
// middleware copies it into Request.Pattern, the field net/http's ServeMux
// uses for the matched pattern, so that ByRoute (and ratelimit.ByRoute) key
// by "/users/:id" rather than by the raw path, with no allocation. Requests
// that matched no route (gin's 404 and 405 handlers run engine middleware)
// have no pattern: a route key then returns an error wrapping
// ratelimit.ErrNoKey and the limiter's key-error policy applies (400 unless
// set with ratelimit.OnKeyError).
//
// # Client IP
//
// Key by client with the core's extractors: ratelimit.ByIP when clients
// connect directly, ratelimit.ByClientIP(trustedProxies...) behind proxies.
// They do not use gin's c.ClientIP(), whose result depends on the engine's
// trusted proxies (by default gin trusts every proxy, so any client can pick
// its own X-Forwarded-For address and with it a fresh bucket).
//
// # Store errors
//
// By default a store failure lets the request through without rate-limit
// fields (fail open). With ratelimit.WithFailurePolicy(ratelimit.FailClosed(503))
// the core answers 503, and with ratelimit.WithErrorHandler the handler
// writes the response; either way the chain is aborted (fail closed).
package ratelimitgin

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
)

// New returns gin middleware limiting requests to limit per key, with the
// options of ratelimit.New. For example, 100 requests a minute per client:
//
//	r.Use(ratelimitgin.New(ratelimit.PerMinute(100), ratelimit.ByIP()))
//
// Invalid static configuration panics with a "ratelimit: ..." message, as
// ratelimit.New does.
func New(limit ratelimit.Limit, key ratelimit.KeyFunc, opts ...ratelimit.Option) gin.HandlerFunc {
	return Middleware(ratelimit.NewLimiter(limit, key, opts...))
}

// Middleware returns gin middleware applying l, for a limiter built once with
// ratelimit.NewLimiter and shared between routes, or also used directly
// (l.Allow) in handlers. It panics if l is nil.
func Middleware(l *ratelimit.Limiter) gin.HandlerFunc {
	if l == nil {
		panic("ratelimitgin: Middleware(nil)")
	}
	return func(c *gin.Context) {
		r := c.Request
		// Make gin's matched route visible to key functions, as ServeMux
		// does for its own patterns. No allocation: FullPath is stored on
		// the route.
		if fp := c.FullPath(); r.Pattern != fp {
			r.Pattern = fp
		}
		done, ok := l.Admit(c.Writer, r)
		if !ok {
			// Admit wrote the response: 429, key error, denied handler or
			// fail-closed store error.
			c.Abort()
			return
		}
		// done releases Concurrency slots once the rest of the chain has
		// run; for other algorithms it does nothing.
		defer done()
		c.Next()
	}
}

// errNoRoute is returned by ByRoute when there is no gin route.
var errNoRoute = fmt.Errorf("%w: ratelimitgin: no gin route matched (FullPath is empty), or the limiter was not installed with ratelimitgin.New or Middleware", ratelimit.ErrNoKey)

// ByRoute returns a key function that keys requests by the gin route that
// matched, c.FullPath(), such as "/api/users/:id": requests to /api/users/1
// and /api/users/2 share one bucket, and clients cannot mint keys by varying
// the path. The method is not part of the key.
//
// It reads the pattern that New and Middleware store in Request.Pattern, so
// use it with them. A request that matched no route (a 404) gives an error
// wrapping ratelimit.ErrNoKey. Combine it with a client key for a
// per-client, per-route limit:
//
//	ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute())
func ByRoute() ratelimit.KeyFunc {
	return routeKey
}

func routeKey(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", errNoRoute
	}
	return r.Pattern, nil
}
