package ratelimit

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/internal/fieldval"
)

// Option configures a Limiter or the middleware New returns.
type Option func(*config)

type config struct {
	store      Store
	clock      Clock
	name       string
	headers    HeaderStyle
	carveOuts  []string
	skippers   []func(*http.Request) bool
	denied     func(http.ResponseWriter, *http.Request, *Verdict)
	onError    func(http.ResponseWriter, *http.Request, error)
	onKeyError KeyErrorPolicy
	observers  []Observer
	timeout    time.Duration
	ruleOpts   []string // WithName, which NewRules rejects
}

func defaultConfig() config {
	return config{
		name:      "default",
		headers:   HeadersIETF,
		carveOuts: DefaultCarveOuts(),
	}
}

// DefaultCarveOuts returns the paths that pass unlimited by default: the
// usual Kubernetes probes and the Prometheus scrape endpoint, for GET
// requests (and HEAD where the router is known to serve it from the GET
// route) that the carve-out's own route serves. See WithCarveOuts. Each
// call returns a new slice.
func DefaultCarveOuts() []string {
	return []string{"/healthz", "/livez", "/readyz", "/metrics"}
}

// WithStore sets where limit state is kept. The default is a private
// in-process memory store bounded to about a million keys; pass a
// stores/memory or stores/redis Store to size it or to share it.
func WithStore(s Store) Option {
	if s == nil {
		panic("ratelimit: WithStore(nil)")
	}
	checkStore("WithStore's store", s)
	return func(c *config) { c.store = s }
}

// WithClock sets the clock of the default memory store and of the
// X-RateLimit-Reset field. Tests pass a ratelimittest.Clock.
func WithClock(clock Clock) Option {
	if clock == nil {
		panic("ratelimit: WithClock(nil)")
	}
	return func(c *config) { c.clock = clock }
}

// WithName sets the policy name written in the RateLimit fields, the
// problem body and metrics. Unset, the name is made from the key kind and
// the limit, such as "ip-100-per-1m" (see Rule.Name). It keys the state too,
// so two middlewares sharing a store need different names. Names are 1–64
// characters of letters, digits and "-_.:/".
func WithName(name string) Option {
	if !fieldval.ValidName(name) {
		panic(fmt.Sprintf("ratelimit: WithName(%q): use 1-64 letters, digits or -_.:/", name))
	}
	return func(c *config) { c.name = name; c.ruleOpts = append(c.ruleOpts, "WithName") }
}

// WithHeaders selects the rate-limit fields written on limited responses:
// HeadersIETF (the default), HeadersLegacy, both (HeadersIETF|HeadersLegacy)
// or HeadersNone.
func WithHeaders(s HeaderStyle) Option {
	return func(c *config) { c.headers = s }
}

// WithCarveOuts replaces DefaultCarveOuts(): requests for these paths pass
// unlimited and without rate-limit fields, when they will certainly be served
// by the path's own handler; when in doubt, they are limited. Only GET and
// HEAD requests qualify. Where the router has matched the request (inside a
// route, or through the chi, gin and echo adapters), the matched route must be
// exactly one of paths. Where the limiter runs before routing, the path must
// be exactly one of them as sent (no escapes, no trailing or doubled slash,
// no dot segments), and HEAD qualifies only when the limiter wraps a
// *http.ServeMux, which it asks which pattern serves the request. The full
// rule, per router, is in docs/carve-outs.md.
//
// Paths are literal clean paths of letters, digits and "-._~/", not a subtree
// ("/", "/static/") nor a route pattern ("/{id}", "/:id", "/*"); anything else
// panics. Call it with no paths to limit everything.
func WithCarveOuts(paths ...string) Option {
	for _, p := range paths {
		checkCarveOut(p)
	}
	paths = append([]string(nil), paths...)
	return func(c *config) { c.carveOuts = paths }
}

// WithSkip adds a predicate: requests for which it returns true pass
// unlimited and without rate-limit fields. Predicates run after the
// carve-outs and before the key is extracted; keep them cheap. Unlike a
// carve-out, a predicate is not checked against the router: never base it on
// client-controlled input you would not trust to bypass the limit, such as
// the path alone ("/healthz/" and "/%68ealthz" may reach a catch-all route),
// a query parameter or a header your proxy does not set.
func WithSkip(skip func(*http.Request) bool) Option {
	if skip == nil {
		panic("ratelimit: WithSkip(nil)")
	}
	return func(c *config) { c.skippers = append(c.skippers, skip) }
}

// WithDeniedHandler replaces the default 429 problem+json response with f.
// f runs with the rate-limit fields, Retry-After and Cache-Control already
// set; it writes the status and body. v tells what denied the request (its
// Rule, Result and Violated); f answers the request itself, or calls v's
// Write to send the response the limiter sends without f (a handler that
// only logs or counts denials).
func WithDeniedHandler(f func(w http.ResponseWriter, r *http.Request, v *Verdict)) Option {
	if f == nil {
		panic("ratelimit: WithDeniedHandler(nil)")
	}
	return func(c *config) { c.denied = f }
}

// WithErrorHandler sets the response to a store failure (Redis down, a
// deadline passed) under a rule that fails closed: f owns the response
// instead of the default RFC 9457 body; err wraps ErrStoreUnavailable and
// the store's error. It does not change any rule's FailurePolicy: at least
// one enforced rule must fail closed (Rule.OnStoreError), or the Limiter
// panics, since f would never run. Rules fail open by default: the request passes without
// rate-limit fields, and a store outage never becomes an API outage.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if f == nil {
		panic("ratelimit: WithErrorHandler(nil)")
	}
	return func(c *config) { c.onError = f }
}

// OnKeyError sets the key-error policy of every rule of the Limiter; a 400
// unless set. It panics on a Status that is not 0 or a 4xx or 5xx, and on
// a Status with Shared.
func OnKeyError(p KeyErrorPolicy) Option {
	if p.Status != 0 && (p.Status < 400 || p.Status > 599) {
		panic(fmt.Sprintf("ratelimit: OnKeyError: Status %d: use a 4xx or 5xx status", p.Status))
	}
	if p.Shared && p.Status != 0 {
		panic(fmt.Sprintf("ratelimit: OnKeyError: Status %d with Shared: a shared bucket rejects no request", p.Status))
	}
	return func(c *config) { c.onKeyError = p }
}

// WithTimeout bounds each call to the store: a slow or hung store adds at
// most d to a request, after which the rule's FailurePolicy applies. Zero
// (the default) sets no bound beyond the request's own context and the
// store's. The Redis store bounds each of its calls by itself
// (redisstore.DefaultTimeout, 50 ms, unless its own WithTimeout says
// otherwise), so it needs none; set one for a networked store of your own
// that does not bound its calls, or for a tighter bound than the store's.
// Where both are set, the shorter applies.
func WithTimeout(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("ratelimit: WithTimeout(%v): negative budget", d))
	}
	return func(c *config) { c.timeout = d }
}

// WithObserver sends every decision to o: allowed, denied, shadow-denied,
// skipped, key errors, store errors, fallbacks and costs above capacity. See the ratelimitprom and
// ratelimitotel packages for ready-made metrics.
func WithObserver(o Observer) Option {
	if o == nil {
		panic("ratelimit: WithObserver(nil)")
	}
	return func(c *config) { c.observers = append(c.observers, o) }
}
