// Package ratelimitchi adapts github.com/sluicehq/ratelimit to go-chi/chi v5.
//
// chi routers take net/http middleware as is: ratelimit.New returns a
// func(http.Handler) http.Handler that goes straight into r.Use, r.With and
// r.Group. This package adds what chi users need on top: New and
// Middleware, the same middleware with carve-outs decided by chi's routes
// (see Carve-outs below); ByRoute, a key function that reads the route
// pattern chi matched ("/users/{id}", not "/users/42"); and the patterns
// below.
//
// # Global, per-group and per-route limits
//
// A global limit goes in r.Use of the top router; a group limit in r.Use
// inside r.Group (or in a subrouter's r.Use); a per-route limit in r.With:
//
//	r := chi.NewRouter()
//	r.Use(ratelimit.New(ratelimit.PerMinute(600), ratelimit.ByIP()))          // everything
//	r.Group(func(r chi.Router) {
//		r.Use(ratelimit.New(ratelimit.PerMinute(60), ratelimit.ByIP(),
//			ratelimit.WithName("admin")))                                     // this group
//		r.Get("/admin/users", listUsers)
//	})
//	r.With(ratelimit.New(ratelimit.PerMinute(5), ratelimit.ByIP(),
//		ratelimit.WithName("login"))).Post("/login", login)                   // one route
//
// Limits nest: a request to /login counts against the global limit and the
// login limit, and the most restrictive answer wins. Each ratelimit.New has
// its own in-process store unless given one with ratelimit.WithStore; limits
// that share a store need distinct ratelimit.WithName values.
//
// # Where ByRoute works
//
// chi matches a route one router at a time, so the full pattern is known only
// once routing has reached the endpoint. Middleware that runs earlier sees no
// pattern or a partial one ("/api/*"), and a key built from it would put every
// route of the subrouter into one bucket. ByRoute therefore works in:
//
//   - r.With(mw).Get(...) and other inline middleware of one route;
//   - r.Group(func(r chi.Router) { r.Use(mw); ... }), including a Group
//     opened inside r.Route: Group middleware runs after routing.
//
// It does not work, and returns an error wrapping ratelimit.ErrNoKey (so the
// limiter's key-error policy applies: 400 by default, see
// ratelimit.OnKeyError), in:
//
//   - r.Use on the top router: chi has not routed yet;
//   - r.Use inside r.Route or on a router passed to r.Mount: that router has
//     not routed yet either, only its parent has ("/api/*");
//   - r.With(mw).Route(...) or r.With(mw).Mount(...) of a chi router.
//
// ByRoute never returns a partial pattern or the raw path. Limits keyed by
// the client alone (ratelimit.ByIP, ratelimit.ByClientIP, ratelimit.ByUser)
// work in every placement.
//
// # Carve-outs
//
// The carve-outs (ratelimit.DefaultCarveOuts, ratelimit.WithCarveOuts) let
// GET and HEAD requests for health and metrics endpoints through unlimited,
// but only when the carve-out's own route serves them. New and Middleware
// decide from chi's routes: after routing (r.With, r.Group) from the
// pattern chi matched; in r.Use of the top router, before routing, by
// asking the router (chi.Routes.Find) which pattern it will match for the
// request's method and routing path. chi routes on the escaped path and
// neither cleans it nor serves HEAD from a GET route, so "/%68ealthz",
// "//healthz", "/healthz/" and HEAD /healthz with only a GET route reach a
// catch-all or chi's 404 and 405 handlers: they are limited. The core
// middleware (ratelimit.New) is safe under chi too, but at the top it only
// knows the path: it carves out GET requests for the exact path, whatever
// route serves them. See docs/carve-outs.md in the repository.
package ratelimitchi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
)

// New returns chi middleware limiting requests to limit per key, with the
// options of ratelimit.New, whose carve-outs are decided by chi's routes:
//
//	r := chi.NewRouter()
//	r.Use(ratelimitchi.New(ratelimit.PerMinute(600), ratelimit.ByIP()))
//	r.Get("/healthz", health) // unlimited: GET /healthz is carved out
//
// Invalid static configuration panics with a "ratelimit: ..." message, as
// ratelimit.New does.
func New(limit ratelimit.Limit, key ratelimit.KeyFunc, opts ...ratelimit.Option) func(http.Handler) http.Handler {
	return Middleware(ratelimit.NewLimiter(limit, key, opts...))
}

// Middleware returns chi middleware applying l, for a limiter built once
// with ratelimit.NewLimiter and shared between routes. It panics if l is
// nil.
func Middleware(l *ratelimit.Limiter) func(http.Handler) http.Handler {
	if l == nil {
		panic("ratelimitchi: Middleware(nil)")
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("ratelimitchi: Middleware: nil next handler")
		}
		// One path, ServeRoute, for every limiter: an admitted request
		// gets the verdict's context when the limiter settles costs, and
		// gives back its Concurrency slots when next returns.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l.ServeRoute(w, r, route(r, l), nil, nil, func(r *http.Request) error {
				next.ServeHTTP(w, r)
				return nil
			})
		})
	}
}

// route returns the pattern of the route chi serves r with for its method,
// as far as the limiter needs it: "" when r cannot be carved out, when chi
// matches no route, or outside chi.
func route(r *http.Request, l *ratelimit.Limiter) string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return ""
	}
	if len(rctx.RoutePatterns) > 0 {
		// chi has routed, and set r.Pattern to what it matched so far: the
		// endpoint's full pattern inside r.With and r.Group, a mount
		// ("/api/*") in a subrouter's r.Use.
		if !l.CarvesOut(r.Pattern) || exactPattern(rctx.RoutePatterns) != r.Pattern {
			return ""
		}
		return r.Pattern
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead || rctx.Routes == nil {
		return ""
	}
	// Before routing: the path chi will route on, as chi picks it.
	path := rctx.RoutePath
	if path == "" {
		path = r.URL.RawPath
	}
	if path == "" {
		path = r.URL.Path
	}
	// A literal pattern matches only its own text, so only a carve-out
	// path can be routed to a carve-out route: ask chi about those alone.
	if !l.CarvesOut(path) {
		return ""
	}
	return rctx.Routes.Find(chi.NewRouteContext(), r.Method, path)
}

// exactPattern joins the patterns chi matched as chi does, without
// trimming the trailing slash that chi's RoutePattern drops: a route
// "/healthz/" is not the carve-out "/healthz".
func exactPattern(patterns []string) string {
	p := strings.Join(patterns, "")
	for strings.Contains(p, "/*/") {
		p = strings.ReplaceAll(p, "/*/", "/")
	}
	return p
}

// ErrNotRouted is returned by the ByRoute key function when chi has not yet
// matched the full route: the limiter runs in r.Use of a router that routes
// further (see the package documentation). It wraps ratelimit.ErrNoKey.
var ErrNotRouted = fmt.Errorf("%w: ratelimitchi: chi has not matched the full route here; mount the limiter with r.With or inside r.Group, not in r.Use of a router that routes further", ratelimit.ErrNoKey)

// ByRoute returns a key function that keys requests by the route pattern chi
// matched, such as "/api/users/{id}": requests to /api/users/1 and
// /api/users/2 share one bucket, and clients cannot mint new keys by varying
// the path. The pattern does not include the method.
//
// Combine it with a client key for a per-client, per-route limit:
//
//	ratelimit.Keys(ratelimit.ByIP(), ratelimitchi.ByRoute())
//
// The key function returns an error wrapping ErrNotRouted (and so
// ratelimit.ErrNoKey) when it runs before chi has matched the full route; see
// the package documentation for where to mount it.
func ByRoute() ratelimit.KeyFunc {
	var mounts mountCache
	return ratelimit.ByRouteFunc(func(r *http.Request) (string, error) { // key kind "route"
		rctx := chi.RouteContext(r.Context())
		if rctx == nil || len(rctx.RoutePatterns) == 0 {
			return "", ErrNotRouted
		}
		// A pattern ending in "*" may be a subrouter mount that has yet to
		// route ("/api/*"), or a wildcard route ("/files/*"): ask the router.
		last := rctx.RoutePatterns[len(rctx.RoutePatterns)-1]
		if strings.HasSuffix(last, "*") && mounts.pending(rctx.Routes, rctx.RoutePatterns) {
			return "", ErrNotRouted
		}
		// chi sets r.Pattern to the joined pattern just before calling the
		// matched endpoint's handlers; it is the same value as
		// rctx.RoutePattern(), without building it again.
		if p := r.Pattern; p != "" {
			return p, nil
		}
		return rctx.RoutePattern(), nil
	})
}

// mountCache remembers, per router and pattern, which patterns are chi
// subrouter mounts. Route patterns come from the router's configuration, not
// from clients, so the cache is bounded by the number of routes.
type mountCache struct {
	m sync.Map // mountKey -> mountEntry
}

type mountKey struct {
	routes  chi.Routes
	pattern string
}

type mountEntry struct {
	sub   chi.Routes // the subrouter mounted on the pattern, nil for an endpoint
	found bool
}

// pending reports whether the last pattern of chain, matched by routes and
// the subrouters mounted on it, is itself a chi subrouter mount: chi has
// routed up to that mount but not into it yet.
func (mc *mountCache) pending(routes chi.Routes, chain []string) bool {
	for i, p := range chain {
		if routes == nil {
			return false // a route context built by hand: nothing to ask
		}
		e := mc.lookup(routes, p)
		if !e.found {
			return false
		}
		if i == len(chain)-1 {
			return e.sub != nil
		}
		routes = e.sub
	}
	return false
}

func (mc *mountCache) lookup(routes chi.Routes, pattern string) mountEntry {
	k := mountKey{routes, pattern}
	if v, ok := mc.m.Load(k); ok {
		return v.(mountEntry)
	}
	var e mountEntry
	for _, rt := range routes.Routes() {
		if rt.Pattern == pattern {
			e = mountEntry{sub: rt.SubRoutes, found: true}
			break
		}
	}
	mc.m.Store(k, e)
	return e
}
