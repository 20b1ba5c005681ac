package ratelimit

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// KeyFunc extracts the key a request is limited by, such as its client IP.
//
// It returns an error wrapping ErrNoKey when the request carries no usable
// key; the rule's key-error policy then decides the outcome (see OnKeyError).
// When that rejects the request, the problem body's detail says the request
// carries no usable key, unless the error (or one it wraps) has a method
// ProblemDetail() string: that text, for the client, is the detail instead.
// A KeyFunc must be safe for concurrent use.
//
// # Choosing a key
//
// A limit is only as good as its key: a key the client can choose is no limit
// at all. In order of preference:
//
//   - ByUser, after authentication: the identity your auth middleware
//     established. Clients cannot mint identities.
//   - ByIP when clients connect directly; ByClientIP (or
//     ClientIPConfig.KeyFunc) behind proxies. Never ByHeader("X-Forwarded-For").
//   - ByBearerToken / ByAPIKey, hashed, only after the credential has been
//     verified (or together with an IP limit): an unverified random token is
//     a fresh bucket.
//   - ByRoute combined with one of the above, through Keys, for per-endpoint
//     limits.
//
// No key function ever returns "" with a nil error, and none falls back to a
// weaker key when the one it was asked for is missing.
type KeyFunc func(r *http.Request) (string, error)

// reservedHeaders are headers ByHeader refuses, naming the key function to
// use instead: client addresses (spoofable unless walked from trusted
// proxies) and credentials (which must not be stored in clear).
var reservedHeaders = map[string]string{
	"X-Forwarded-For":          "ByClientIP",
	"Forwarded":                "ClientIPConfig.KeyFunc with SourceForwarded",
	"X-Real-Ip":                "ClientIPConfig.KeyFunc with SourceHeader",
	"True-Client-Ip":           "ClientIPConfig.KeyFunc with SourceHeader",
	"Cf-Connecting-Ip":         "ClientIPConfig.KeyFunc with SourceHeader",
	"Fastly-Client-Ip":         "ClientIPConfig.KeyFunc with SourceHeader",
	"X-Client-Ip":              "ClientIPConfig.KeyFunc with SourceHeader",
	"X-Cluster-Client-Ip":      "ClientIPConfig.KeyFunc with SourceHeader",
	"X-Original-Forwarded-For": "ClientIPConfig.KeyFunc",
	"Authorization":            "ByBearerToken or ByAPIKey",
	"Proxy-Authorization":      "ByAPIKey",
	"Cookie":                   "ByUser",
}

// ByHeader keys requests by the value of the request header name, as sent:
// a tenant or client ID set by a gateway, for example.
//
// The value is used in clear, not hashed, so it may show up in your store and
// metrics: for secrets use ByAPIKey or ByBearerToken, which hash. A value the
// client sends is a key the client chooses; use ByHeader for headers that a
// proxy in front of the server sets or overwrites, or that are verified
// before the limiter runs.
//
// A missing or empty header, or a header sent on more than one line (which
// line would count is ambiguous between proxies and applications), gives an
// error wrapping ErrNoKey. ByHeader does not allocate.
//
// It panics if name is not a valid header name, and for headers that have a
// safer key function: X-Forwarded-For, Forwarded, X-Real-IP and other client
// address headers (use ByClientIP or ClientIPConfig.KeyFunc), and Authorization,
// Proxy-Authorization and Cookie (use ByBearerToken, ByAPIKey or ByUser).
func ByHeader(name string) KeyFunc {
	if !validHeaderName(name) {
		panic(fmt.Sprintf("ratelimit: ByHeader: invalid header name %q", name))
	}
	name = http.CanonicalHeaderKey(name)
	if use, ok := reservedHeaders[name]; ok {
		panic(fmt.Sprintf("ratelimit: ByHeader(%q): the header is client-controlled or secret; use %s", name, use))
	}
	errMissing := fmt.Errorf("%w: ByHeader: %s header missing or empty", ErrNoKey, name)
	errRepeated := fmt.Errorf("%w: ByHeader: %s header repeated", ErrNoKey, name)
	return func(r *http.Request) (string, error) {
		switch v := r.Header.Values(name); len(v) {
		case 1:
			if v[0] == "" {
				return "", errMissing
			}
			return v[0], nil
		case 0:
			return "", errMissing
		default:
			return "", errRepeated
		}
	}
}

// ByUser keys requests by an authenticated identity, read by identity
// (typically from the request context, where your authentication middleware
// put it). Install the limiter after that middleware.
//
// identity returning false or an empty string (an anonymous request) gives an
// error wrapping ErrNoKey, so anonymous traffic takes the key-error policy
// rather than one shared user bucket; to limit anonymous requests by address
// instead, put a ByClientIP or ByIP rule in front. The identity is used in
// clear. ByUser panics if identity is nil.
func ByUser(identity func(*http.Request) (string, bool)) KeyFunc {
	if identity == nil {
		panic("ratelimit: ByUser: nil identity function")
	}
	errAnon := fmt.Errorf("%w: ByUser: no authenticated user", ErrNoKey)
	return func(r *http.Request) (string, error) {
		id, ok := identity(r)
		if !ok || id == "" {
			return "", errAnon
		}
		return id, nil
	}
}

// ByRoute keys requests by the route pattern that matched them,
// http.Request.Pattern as set by http.ServeMux since Go 1.22, such as
// "GET /users/{id}": /users/1 and /users/2 share one bucket, and a client
// cannot mint keys by varying the path. The raw URL path is never used.
//
// A request without a pattern (no ServeMux route matched, or the router is not
// a ServeMux) gives an error wrapping ErrNoKey; install the limiter inside the
// mux, on the handlers it routes to, so that Pattern is set. While no request
// has had a pattern, the limiter is taken to wrap the whole router: the
// error's text, the 400 problem body's detail and one log line through
// log/slog (at the first such request) say where it belongs. For other
// routers use ByRouteFunc or the framework adapter's route key. With chi in
// particular use ratelimitchi.ByRoute: chi sets Pattern one router at a
// time, so inside a mounted subrouter Pattern holds only the mount ("/api/*").
//
// Combine it with a client key for per-client, per-route limits:
// Keys(ByUser(f), ByRoute()).
func ByRoute() KeyFunc {
	errNoRoute := fmt.Errorf("%w: ByRoute: no route pattern matched (Request.Pattern is empty)", ErrNoKey)
	var routed, warned atomic.Bool
	return func(r *http.Request) (string, error) {
		if r.Pattern != "" {
			if !routed.Load() {
				routed.Store(true)
			}
			return r.Pattern, nil
		}
		if routed.Load() {
			return "", errNoRoute
		}
		// No request has had a pattern: the limiter almost certainly
		// wraps the whole router, where Pattern is not set yet.
		if !warned.Swap(true) {
			slog.Warn(errOutsideRouter.Error())
		}
		return "", errOutsideRouter
	}
}

// errOutsideRouter is ByRoute's error while no request has had a pattern.
// Its detail goes into the 400 problem body, for the developer.
var errOutsideRouter = &keyError{
	err: fmt.Errorf("%w: ByRoute: no request has had a route pattern", ErrNoKey),
	detail: "ByRoute found no route pattern on any request: the rate limiter wraps the router. " +
		"Install it inside the router, on the handlers a ServeMux routes to " +
		"(mux.Handle(\"GET /items\", limit(items))), not around the ServeMux.",
}

// keyError is a key function's error with a detail for the problem body.
type keyError struct {
	err    error
	detail string
}

func (e *keyError) Error() string         { return e.err.Error() + ": " + e.detail }
func (e *keyError) Unwrap() error         { return e.err }
func (e *keyError) ProblemDetail() string { return e.detail }

// ByRouteFunc keys requests by the route pattern returned by pattern, for
// routers other than http.ServeMux: chi's RouteContext(ctx).RoutePattern(),
// gin's FullPath(), echo's Path(). pattern must return the template that
// matched ("/users/{id}"), never the request's path, and "" when nothing
// matched, which gives an error wrapping ErrNoKey. A pattern function that
// can tell why it has no route returns that as its error instead (wrap
// ErrNoKey in it, so that the key-error policy applies); the framework
// adapters' ByRoute functions are made this way. Either way the key's kind
// in events and metrics is "route". It panics if pattern is nil.
func ByRouteFunc[P func(*http.Request) string | func(*http.Request) (string, error)](pattern P) KeyFunc {
	if pattern == nil {
		panic("ratelimit: ByRouteFunc: nil pattern function")
	}
	errNoRoute := fmt.Errorf("%w: ByRouteFunc: no route pattern matched", ErrNoKey)
	var match func(*http.Request) (string, error)
	switch p := any(pattern).(type) {
	case func(*http.Request) string:
		match = func(r *http.Request) (string, error) { return p(r), nil }
	case func(*http.Request) (string, error):
		match = p
	}
	return func(r *http.Request) (string, error) {
		p, err := match(r)
		if err == nil && p == "" {
			err = errNoRoute
		}
		if err != nil {
			return "", err
		}
		return p, nil
	}
}

// Keys combines key functions into one composite key, such as a user and a
// route: Keys(ByUser(f), ByRoute()). If any part fails, Keys returns that
// part's error.
//
// Parts are joined unambiguously, each as its length, a colon and its value,
// separated by "|" ("5:alice|16:GET /users/{id}"), so that no value can forge
// a boundary: ("a|b", "c") and ("a", "b|c") give different keys. A single
// part's key is returned unchanged. A part returning "" with a nil error is
// treated as an error wrapping ErrNoKey.
//
// Keys panics if there are no parts or a part is nil.
func Keys(parts ...KeyFunc) KeyFunc {
	if len(parts) == 0 {
		panic("ratelimit: Keys: no parts")
	}
	for i, p := range parts {
		if p == nil {
			panic(fmt.Sprintf("ratelimit: Keys: part %d is nil", i))
		}
	}
	parts = append([]KeyFunc(nil), parts...) // the caller's slice may change
	errEmpty := make([]error, len(parts))
	for i := range parts {
		errEmpty[i] = fmt.Errorf("%w: Keys: part %d returned an empty key", ErrNoKey, i)
	}
	if len(parts) == 1 {
		part := parts[0]
		return func(r *http.Request) (string, error) {
			k, err := part(r)
			if err == nil && k == "" {
				return "", errEmpty[0]
			}
			return k, err
		}
	}
	return func(r *http.Request) (string, error) {
		var stack [8]string
		keys := stack[:0]
		size := 0
		for i, part := range parts {
			k, err := part(r)
			if err != nil {
				return "", err
			}
			if k == "" {
				return "", errEmpty[i]
			}
			keys = append(keys, k)
			size += len(k) + 22 // up to 20 digits, ':' and '|'
		}
		var buf [256]byte
		b := buf[:0]
		if size > len(buf) {
			b = make([]byte, 0, size)
		}
		for i, k := range keys {
			if i > 0 {
				b = append(b, '|')
			}
			b = strconv.AppendInt(b, int64(len(k)), 10)
			b = append(b, ':')
			b = append(b, k...)
		}
		return string(b), nil
	}
}

// validHeaderName reports whether s is a non-empty RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	return strings.IndexFunc(s, func(c rune) bool {
		return c >= 0x80 || !isTchar(byte(c))
	}) < 0
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
