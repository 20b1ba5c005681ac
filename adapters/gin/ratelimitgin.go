// Package ratelimitgin adapts github.com/sluicehq/ratelimit to gin-gonic/gin.
//
// New takes the same limits, key functions, stores and options as
// ratelimit.New and returns a gin.HandlerFunc. It runs the core limiter
// through one path, ratelimit.Limiter.ServeRoute: an allowed request gets the rate-limit fields
// and goes on down the chain; a denied one gets the core's 429 (the same
// fields, Retry-After, Cache-Control and RFC 9457 problem+json body) and the
// chain is aborted with c.Abort. Nothing about limiting is reimplemented here.
// (Concurrency limits release their slot when the rest of the chain
// returns.)
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
// # Carve-outs
//
// The carve-outs (ratelimit.DefaultCarveOuts, ratelimit.WithCarveOuts) are
// decided from the route gin matched, c.FullPath(), never from the raw
// path: a GET or HEAD request skips the limiter only when gin matched a
// route registered for its method at exactly a carve-out path, so its
// handler is the one serving it. Requests that reach NoRoute or NoMethod
// ("//healthz", "/healthz/", HEAD /healthz with only a GET route) are
// limited. See docs/carve-outs.md in the repository.
//
// # Denials in your own format
//
// NewWithConfig takes a DenyHandler, a gin handler that renders the 429
// with the verdict, for example in the application's JSON error format:
//
//	r.Use(ratelimitgin.NewWithConfig(ratelimitgin.Config{
//		Limit: ratelimit.PerMinute(100),
//		Key:   ratelimit.ByIP(),
//		DenyHandler: func(c *gin.Context, v *ratelimit.Verdict) {
//			c.JSON(http.StatusTooManyRequests, gin.H{"error": "rate_limited",
//				"retry_in_ms": v.Result().RetryAfter.Milliseconds()})
//		},
//	}))
//
// # Settled costs
//
// Under a limiter that settles costs (ratelimit.Rule.Settled), handlers
// report a request's actual cost with
// ratelimit.Settle(c.Request.Context(), c.Writer, n): the middleware gives c.Request
// the context Settle reads.
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
// fields (fail open). With a rule that fails closed (Config.Rules, with
// Rule.OnStoreError ratelimit.FailurePolicy{Status: 503}) the core answers 503, and
// with ratelimit.WithErrorHandler the handler writes the response; either
// way the chain is aborted (fail closed).
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
	return checked(l, nil)
}

// Config configures the middleware NewWithConfig returns.
type Config struct {
	// Limit is the limit per key, as in ratelimit.New. Required unless
	// Rules is set.
	Limit ratelimit.Limit

	// Key extracts the key requests are limited by, such as
	// ratelimit.ByIP() or ratelimit.Keys(ratelimit.ByIP(), ByRoute()).
	// Required unless Rules is set.
	Key ratelimit.KeyFunc

	// Rules, if set, are the limiter's rules, as in ratelimit.NewRules, in
	// place of Limit and Key: for an algorithm other than GCRA, a cost, a
	// failure policy, pacing, settlement, or several rules.
	Rules []ratelimit.Rule

	// Options are the options of ratelimit.New: store, name, headers,
	// carve-outs, key-error policy and so on. DenyHandler, when
	// set, replaces ratelimit.WithDeniedHandler.
	Options []ratelimit.Option

	// DenyHandler, if set, replaces the core's 429 response. It runs with
	// the rate-limit fields, Retry-After and Cache-Control already set and
	// gets the verdict: the rule that denied (Rule) and its Result (RetryAfter,
	// Remaining, Limit). It writes the response, status included, for
	// example with c.JSON(http.StatusTooManyRequests, ...). The chain is
	// aborted after it returns; the next handler is never called.
	DenyHandler func(c *gin.Context, v *ratelimit.Verdict)
}

// NewWithConfig returns gin middleware configured by cfg. It panics on an
// invalid configuration, as ratelimit.New does.
func NewWithConfig(cfg Config) gin.HandlerFunc {
	if cfg.DenyHandler == nil {
		return Middleware(cfg.limiter())
	}
	return checked(cfg.limiter(), cfg.DenyHandler)
}

// limiter builds the Limiter of cfg: its Rules, or its Limit and Key.
func (cfg Config) limiter() *ratelimit.Limiter {
	if cfg.Rules != nil {
		return ratelimit.NewRulesLimiter(cfg.Rules, cfg.Options...)
	}
	return ratelimit.NewLimiter(cfg.Limit, cfg.Key, cfg.Options...)
}

// checked is the middleware built on ratelimit.Limiter.ServeRoute: deny,
// if not nil, renders denials, and an admitted request's handler gets the
// verdict's context, through which it settles its cost (ratelimit.Settle).
// A request that does not reach the rest of the chain is aborted.
func checked(l *ratelimit.Limiter, deny func(*gin.Context, *ratelimit.Verdict)) gin.HandlerFunc {
	return func(c *gin.Context) {
		var onDeny func(*ratelimit.Verdict) error
		if deny != nil {
			onDeny = func(v *ratelimit.Verdict) error { deny(c, v); return nil }
		}
		// gin's writer reports the status to adaptive rules when the
		// limiter is done with the request.
		served, _ := l.ServeRoute(c.Writer, pattern(c), c.FullPath(), onDeny, nil, func(r *http.Request) error {
			c.Request = r // Settle reads its context
			c.Next()
			return nil
		})
		if !served {
			c.Abort()
		}
	}
}

// pattern makes gin's matched route visible to key functions, as ServeMux
// does for its own patterns, and returns the request. No allocation:
// FullPath is stored on the route.
func pattern(c *gin.Context) *http.Request {
	r := c.Request
	if fp := c.FullPath(); r.Pattern != fp {
		r.Pattern = fp
	}
	return r
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
	return ratelimit.ByRouteFunc(routeKey) // reported with key kind "route"
}

func routeKey(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", errNoRoute
	}
	return r.Pattern, nil
}
