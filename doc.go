// Package ratelimit is rate-limiting middleware for net/http: per client IP,
// user, tenant, API key or route, on an in-process store or on Redis shared
// by a fleet, with the IETF RateLimit header fields.
//
// # Quick start
//
// Limit every client IP to 100 requests a minute:
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("GET /api/items", listItems)
//	limit := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP())
//	http.ListenAndServe(":8080", limit(mux))
//
// Every limited response carries the rate-limit fields; a denied request
// gets 429 Too Many Requests with Retry-After and an RFC 9457 problem body.
// GET and HEAD requests for /healthz, /livez, /readyz and /metrics pass
// untouched (see WithCarveOuts).
//
// # Choosing a key
//
// The key decides whose requests share a bucket, and so who can escape the
// limit. ByIP uses the connecting peer and never reads a header: right when
// clients connect directly. Behind a load balancer or CDN, use ByClientIP
// with the proxies you trust, which walks X-Forwarded-For (or Forwarded) from
// the right and stops at the first address you do not trust, so a client
// cannot choose its own key. ByBearerToken and ByAPIKey key by credential
// (hashed, never stored in clear), ByUser by the authenticated identity, and
// Keys combines keys, for example a user on a route:
//
//	ratelimit.Keys(ratelimit.ByUser(userFromContext), ratelimit.ByRoute())
//
// ByRoute uses the matched pattern ("GET /users/{id}"), never the raw path,
// so clients cannot mint keys. A request whose key cannot be extracted is
// rejected with 400 by default, never let through; see OnKeyError.
//
// # Algorithms
//
// GCRA, the default, is a token bucket kept as one timestamp per key: Burst
// requests at once, refilled smoothly at Rate per Period. SlidingWindow
// weights the previous window's count; FixedWindow counts per calendar or
// epoch-aligned window and suits quotas (see Quota, Daily, Monthly);
// Concurrency caps requests in flight; SlidingLog keeps the time of every
// admitted event, exact in any trailing window, for low-cardinality limits
// (docs/sliding-log.md). Each reports exact Remaining, RetryAfter and
// ResetAfter.
//
// # Several rules
//
// NewRules stacks rules on one request: a global cap, a per-IP limit, a
// daily quota per API key, a concurrency cap per tenant. Every rule is
// checked; a request is admitted only if all allow it, and a denial by one
// rule consumes nothing from the others. Limiters nested around one handler
// do not stack that way: each counts a request as it passes, so one the
// inner limiter denies has been counted by the outer one; make a route's
// limit a rule of the same limiter (a LimitFunc that exempts other routes)
// when that matters. Package tiers builds the rules of a tiered
// API from a plan per tenant. A Rule can run in Shadow mode, reporting to an
// Observer without ever denying.
//
// # Headers
//
// By default each limited response carries the fields of
// draft-ietf-httpapi-ratelimit-headers-11, here for New(PerMinute(100), ByIP()):
//
//	RateLimit-Policy: "ip-100-per-1m";q=100;w=60
//	RateLimit: "ip-100-per-1m";r=42;t=1
//
// r is the quota available now and t the seconds until one more unit is
// (under GCRA, at most Period/Rate rounded up); see HeadersIETF.
// The policy name is the rule's name: WithName (or Rule.Name) sets it;
// without one it is made from the key kind and the limit ("ip-100-per-1m",
// "api_key-10-per-1s-burst-20"), so that limiters nested around one handler
// report distinct policies. It also keys the state in the store.
//
// WithHeaders selects the legacy X-RateLimit-* fields instead, both, or none.
//
// # When the store fails
//
// A store error is never a denial unless you choose it. Each rule has a
// FailurePolicy: fail open (the default), fail closed with a Status of 429
// or 503, or check a Fallback store, a local one. WithTimeout bounds every store call, and
// breaker.New (package github.com/sluicehq/ratelimit/breaker) stops calling a
// store that keeps failing and probes it back.
//
// # Testing
//
// Package ratelimittest has a fake Clock, request helpers for httptest, and
// TestStore, the conformance suite every Store passes.
package ratelimit
