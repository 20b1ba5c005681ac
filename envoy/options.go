package envoy

import (
	"fmt"
	"time"

	"github.com/sluicehq/ratelimit"
)

// An Option configures a Service.
type Option func(*options) error

type options struct {
	alg       ratelimit.Algorithm
	reference bool // the reference's fixed windows, charged whether or not they fit
	clock     ratelimit.Clock
	failure   FailurePolicy
	timeout   time.Duration
	shadow    bool
	headers   bool
	observers []ratelimit.Observer
}

// WithAlgorithm counts every limit with a (GCRA, the default,
// SlidingWindow, FixedWindow or SlidingLog). Under each, a descriptor that
// does not fit is denied and charged nothing. Under SlidingLog no trailing
// unit ever admits more than requests_per_unit, and a limit above
// stores.MaxSlidingLog is refused when the rules are put in force (a
// request's limit override above it gets InvalidArgument). Concurrency does
// not apply: Envoy never reports when a request ends.
func WithAlgorithm(a ratelimit.Algorithm) Option {
	return func(o *options) error {
		switch a {
		case ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.SlidingLog:
		default:
			return fmt.Errorf("ratelimit: envoy counts with GCRA, SlidingWindow, FixedWindow or SlidingLog, not %v", a)
		}
		o.alg, o.reference = a, false
		return nil
	}
}

// WithReferenceWindows reproduces envoyproxy/ratelimit's counting exactly:
// fixed windows of the unit aligned to the Unix epoch (a minute starts at
// :00, a day at 00:00 UTC, a month is 30 days and a year 365 days from
// 1970), every descriptor charged its hits whether or not they fit (the
// count goes past the limit, as the reference's INCRBY does), OVER_LIMIT
// once the count passes requests_per_unit, limit_remaining the limit less
// the count, and duration_until_reset the whole seconds to the window's
// end. It allows twice the limit across a window boundary, as the
// reference does.
func WithReferenceWindows() Option {
	return func(o *options) error {
		o.alg, o.reference = ratelimit.FixedWindow, true
		return nil
	}
}

// WithClock sets the clock the service reads for duration_until_reset
// under WithReferenceWindows; the store keeps its own.
func WithClock(c ratelimit.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("ratelimit: envoy WithClock(nil)")
		}
		o.clock = c
		return nil
	}
}

// WithFailurePolicy sets what a descriptor gets when the store fails;
// FailOpen by default.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(o *options) error { o.failure = p; return nil }
}

// WithTimeout bounds each ShouldRateLimit's calls to the store; past it
// the failure policy decides. Zero, the default, leaves the budget to the
// store (the Redis store's is 50ms) and to the caller's deadline. Set it,
// and the store's, below the timeout of Envoy's rate_limit filter (20ms by
// default), so that the policy chosen here applies rather than Envoy's.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("ratelimit: envoy WithTimeout(%v): negative", d)
		}
		o.timeout = d
		return nil
	}
}

// WithShadowMode answers OK overall whatever the descriptors' statuses
// (the reference's SHADOW_MODE): each status still says OVER_LIMIT where
// a limit is exceeded, so that the decisions can be watched before they
// are enforced.
func WithShadowMode() Option {
	return func(o *options) error { o.shadow = true; return nil }
}

// WithoutHeaders stops the service from asking Envoy to add the
// RateLimit, RateLimit-Policy and Retry-After fields to responses.
func WithoutHeaders() Option {
	return func(o *options) error { o.headers = false; return nil }
}

// WithObserver reports every descriptor's decision to o, as a Limiter
// reports its rules' (so the library's Prometheus and OpenTelemetry
// observers count the service's decisions): Rule is the limit's name in
// the RateLimit fields (its name, else its full key; a descriptor's own
// limit override is reported as "<domain>.override"), KeyKind "envoy",
// Outcome Allowed, Denied, ShadowDenied (shadow and quota mode),
// StoreError, Fallback or CostExceeded (more hits than any window holds),
// and Latency the store call's. Request is nil. Observe is called on the
// call's path, possibly concurrently: keep it fast.
func WithObserver(o ratelimit.Observer) Option {
	return func(opts *options) error {
		if o == nil {
			return fmt.Errorf("ratelimit: envoy WithObserver(nil)")
		}
		opts.observers = append(opts.observers, o)
		return nil
	}
}
