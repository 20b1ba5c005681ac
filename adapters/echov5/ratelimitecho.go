// Package ratelimitecho adapts github.com/sluicehq/ratelimit to
// labstack/echo v5. Its API is that of the echo v4 adapter
// (github.com/sluicehq/ratelimit/adapters/echo), with *echo.Context for
// echo.Context.
//
// New takes the same limits, key functions, stores and options as
// ratelimit.New and returns an echo.MiddlewareFunc; NewWithConfig adds echo's
// conventions: a Skipper, and handlers that return errors for echo's
// HTTPErrorHandler. Both run the core limiter through one path,
// ratelimit.Limiter.ServeRoute: nothing about limiting, headers or bodies is
// reimplemented here.
//
// # Global, per-group and per-route limits
//
//	e := echo.New()
//	e.Use(ratelimitecho.New(ratelimit.PerMinute(600), ratelimit.ByIP()))   // everything
//	api := e.Group("/api", ratelimitecho.New(ratelimit.PerMinute(60),
//		ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()),
//		ratelimit.WithName("api")))                                          // a group, per route
//	api.GET("/users/:id", getUser)
//	e.POST("/login", login, ratelimitecho.New(ratelimit.PerMinute(5),
//		ratelimit.ByIP(), ratelimit.WithName("login")))                      // one route
//
// Limits nest: a request to /login counts against the global limit and the
// login limit. Each New has its own in-process store unless given one with
// ratelimit.WithStore; limits sharing a store need distinct
// ratelimit.WithName values. One middleware value used on several routes
// shares its limiter (and buckets) between them.
//
// # Responses and errors
//
// A denied request gets the core's 429: the rate-limit fields, Retry-After,
// Cache-Control and an RFC 9457 problem+json body, identical to
// ratelimit.New on net/http. The middleware then returns nil: the response is
// complete, and returning an error would make echo's HTTPErrorHandler (or a
// custom one that does not check Response().Committed) write a second one.
// To handle denials the echo way, set Config.DenyHandler: it runs with the
// rate-limit fields and Retry-After already set and its error is returned,
// for example echo.NewHTTPError(http.StatusTooManyRequests) rendered by
// echo's error handler.
//
// A store failure (Redis down, a deadline passed) lets the request through
// without rate-limit fields (fail open) unless Config.ErrorHandler is set:
// its error is returned from the middleware (fail closed, typically
// echo.NewHTTPError(http.StatusServiceUnavailable, "")); returning nil lets the
// request through after all, for example after logging the error. A rule
// that fails closed (a Status in its OnStoreError) works too, with the
// core's RFC 9457 response.
//
// A request whose key cannot be extracted gets the core's key-error response
// (400 problem+json unless set with ratelimit.OnKeyError).
//
// # Route keys
//
// echo matches the route before it runs e.Use, group and route middleware,
// so c.Path() is known there. The middleware copies it into
// Request.Pattern, the field net/http's ServeMux uses for the matched
// pattern, so that ByRoute (and ratelimit.ByRoute) key by "/users/:id"
// rather than by the raw path, with no allocation. Middleware added with
// e.Pre runs before routing: there ByRoute returns an error wrapping
// ratelimit.ErrNoKey. Requests in a group that match none of its routes have
// the group's catch-all path ("/api/*") as their route.
//
// # Carve-outs
//
// The carve-outs (ratelimit.DefaultCarveOuts, ratelimit.WithCarveOuts) are
// decided from the route echo matched, never from the raw path: a GET or
// HEAD request skips the limiter only when echo matched a route registered
// for its method at exactly a carve-out path, so its handler is the one
// serving it. Requests served by a catch-all ("/*"), a group's not-found
// route, or echo's 404 and 405 handlers ("/%68ealthz", "//healthz", HEAD
// /healthz with only a GET route) are limited. Middleware added with e.Pre
// runs before routing and carves nothing out. See docs/carve-outs.md in the
// repository.
//
// # Settled costs
//
// Under a limiter that settles costs (ratelimit.Rule.Settled), handlers
// report a request's actual cost with
// ratelimit.Settle(c.Request().Context(), c.Response(), n): the middleware sets the
// request to one carrying the context Settle reads.
//
// # Client IP
//
// Key by client with the core's extractors: ratelimit.ByIP when clients
// connect directly, ratelimit.ByClientIP(trustedProxies...) behind proxies.
// echo v5's c.RealIP() is the peer's address unless e.IPExtractor is set, and
// then only as trustworthy as that extractor's configuration; the core's
// extractors fail closed on every header a client could have forged.
package ratelimitecho

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/sluicehq/ratelimit"
)

// Config configures the middleware NewWithConfig returns.
type Config struct {
	// Skipper decides, per request, to bypass the limiter: skipped requests
	// are neither counted nor given rate-limit fields. The default,
	// middleware.DefaultSkipper, skips nothing. Never base it on input a
	// client controls.
	Skipper middleware.Skipper

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
	// carve-outs, key-error policy and so on. DenyHandler and
	// ErrorHandler, when set, replace ratelimit.WithDeniedHandler and
	// ratelimit.WithErrorHandler.
	Options []ratelimit.Option

	// DenyHandler, if set, replaces the core's 429 response. It runs with the
	// rate-limit fields, Retry-After and Cache-Control already set, and gets
	// the verdict (its Rule, Result and Violated). The error it returns is
	// returned from the middleware, for echo's HTTPErrorHandler: return
	// echo.NewHTTPError(http.StatusTooManyRequests, "") to have echo render the
	// denial, or write a response with c and return nil. The next handler is
	// never called.
	DenyHandler func(c *echo.Context, v *ratelimit.Verdict) error

	// ErrorHandler, if set, is called when the store fails. A non-nil error
	// is returned from the middleware and the request stops there (fail
	// closed): return echo.NewHTTPError(http.StatusServiceUnavailable, ""), say.
	// A nil error lets the request through (fail open), as when
	// ErrorHandler is not set: the rules whose stores answer still count it.
	// err wraps the store's error.
	ErrorHandler func(c *echo.Context, err error) error
}

// New returns echo middleware limiting requests to limit per key, with the
// options of ratelimit.New. For example, 100 requests a minute per client:
//
//	e.Use(ratelimitecho.New(ratelimit.PerMinute(100), ratelimit.ByIP()))
//
// Invalid static configuration panics with a "ratelimit: ..." message, as
// ratelimit.New does.
func New(limit ratelimit.Limit, key ratelimit.KeyFunc, opts ...ratelimit.Option) echo.MiddlewareFunc {
	return NewWithConfig(Config{Limit: limit, Key: key, Options: opts})
}

// Middleware returns echo middleware applying l, for a limiter built once
// with ratelimit.NewLimiter and also used directly (l.Allow) in handlers.
// It panics if l is nil.
func Middleware(l *ratelimit.Limiter) echo.MiddlewareFunc {
	if l == nil {
		panic("ratelimitecho: Middleware(nil)")
	}
	return checked(l, Config{})
}

// NewWithConfig returns echo middleware configured by cfg. It panics on an
// invalid configuration, as ratelimit.New does.
func NewWithConfig(cfg Config) echo.MiddlewareFunc {
	skipper := cfg.Skipper
	if skipper == nil {
		skipper = middleware.DefaultSkipper
	}
	if cfg.DenyHandler == nil && cfg.ErrorHandler == nil {
		mw := Middleware(cfg.limiter())
		if cfg.Skipper == nil {
			return mw
		}
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			limited := mw(next)
			return func(c *echo.Context) error {
				if skipper(c) {
					return next(c)
				}
				return limited(c)
			}
		}
	}

	return checked(cfg.limiter(), cfg)
}

// limiter builds the Limiter of cfg: its Rules, or its Limit and Key.
func (cfg Config) limiter() *ratelimit.Limiter {
	if cfg.Rules != nil {
		return ratelimit.NewRulesLimiter(cfg.Rules, cfg.Options...)
	}
	return ratelimit.NewLimiter(cfg.Limit, cfg.Key, cfg.Options...)
}

// checked is the middleware built on ratelimit.Limiter.ServeRoute, with
// cfg's Skipper, DenyHandler and ErrorHandler when set; an admitted
// request's handler gets the verdict's context, through which it settles
// its cost (ratelimit.Settle).
func checked(l *ratelimit.Limiter, cfg Config) echo.MiddlewareFunc {
	skipper := cfg.Skipper
	if skipper == nil {
		skipper = middleware.DefaultSkipper
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if skipper(c) {
				return next(c)
			}
			var deny func(*ratelimit.Verdict) error
			if cfg.DenyHandler != nil {
				deny = func(v *ratelimit.Verdict) error { return cfg.DenyHandler(c, v) }
			}
			var onError func(error) error
			if cfg.ErrorHandler != nil {
				onError = func(err error) error { return cfg.ErrorHandler(c, err) }
			}
			_, err := l.ServeRoute(c.Response(), setPattern(c), route(c, l), deny, onError, func(r *http.Request) error {
				if r != c.Request() {
					c.SetRequest(r) // Settle reads its context
				}
				return next(c)
			})
			return err
		}
	}
}

// setPattern makes echo's matched route visible to key functions, as
// ServeMux does for its own patterns, and returns the request. No
// allocation: the path is stored on the route.
func setPattern(c *echo.Context) *http.Request {
	r := c.Request()
	if p := c.Path(); r.Pattern != p {
		r.Pattern = p
	}
	return r
}

// route returns the route echo matched for the request, c.Path(), or ""
// when it matched none. A path the limiter would carve out is confirmed
// with c.RouteInfo(), which echo leaves empty for its 404 and 405 handlers
// and which names the RouteNotFound pseudo-method for not-found routes.
func route(c *echo.Context, l *ratelimit.Limiter) string {
	p := c.Path()
	if p == "" || !l.CarvesOut(p) {
		return p
	}
	ri := c.RouteInfo()
	if ri.Method == "" || ri.Method == echo.RouteNotFound || ri.Path != p {
		return ""
	}
	return p
}

// errNoRoute is returned by ByRoute when there is no echo route.
var errNoRoute = fmt.Errorf("%w: ratelimitecho: no echo route matched (c.Path() is empty: e.Pre middleware runs before routing), or the limiter was not installed with this package", ratelimit.ErrNoKey)

// ByRoute returns a key function that keys requests by the echo route that
// matched, c.Path(), such as "/api/users/:id": requests to /api/users/1 and
// /api/users/2 share one bucket, and clients cannot mint keys by varying the
// path. The method is not part of the key.
//
// It reads the path that this package's middleware stores in
// Request.Pattern, so use it with New, NewWithConfig or Middleware, installed
// with e.Use, on a group or on a route, not with e.Pre: before routing there
// is no route and ByRoute returns an error wrapping ratelimit.ErrNoKey.
// Combine it with a client key for a per-client, per-route limit:
//
//	ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute())
func ByRoute() ratelimit.KeyFunc {
	return ratelimit.ByRouteFunc(routeKey) // reported with key kind "route"
}

func routeKey(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", errNoRoute
	}
	return r.Pattern, nil
}
