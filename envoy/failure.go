package envoy

import (
	"fmt"
	"reflect"

	"github.com/sluicehq/ratelimit"
)

// FailurePolicy is what a descriptor gets when the store cannot decide
// (Redis down, slower than the time budget, the breaker open). The zero
// value is FailOpen().
//
//	policy          the descriptor                       pair with Envoy's
//	FailOpen        OK, without limit_remaining          failure_mode_deny: false
//	FailClosed      OVER_LIMIT (Envoy answers 429)        either
//	FailWithError   the whole call fails with UNAVAILABLE failure_mode_deny: true to deny (500
//	                                                     or status_on_error), false to allow
//	FallbackTo      decided by a local store             either
type FailurePolicy struct {
	mode      failMode
	fallback  ratelimit.Store
	instances int
}

type failMode uint8

const (
	failOpen failMode = iota
	failClosed
	failError
	failFallback
)

// FailOpen lets the descriptor through when the store fails: an outage of
// Redis is never an outage of the API. The default.
func FailOpen() FailurePolicy { return FailurePolicy{} }

// FailClosed answers OVER_LIMIT for the descriptor when the store fails:
// the limit is never exceeded, and clients get 429 during the outage.
func FailClosed() FailurePolicy { return FailurePolicy{mode: failClosed} }

// FailWithError fails the whole ShouldRateLimit call with the gRPC code
// UNAVAILABLE when a store fails, so that Envoy applies its own setting:
// failure_mode_deny false lets the request through, true denies it (with
// the filter's status_on_error, 500 by default). A descriptor in shadow or
// quota mode, and every descriptor under WithShadowMode, only reports: its
// store failure is answered as under FailOpen and never fails the call.
func FailWithError() FailurePolicy { return FailurePolicy{mode: failError} }

// FallbackTo decides descriptors with store while the main store fails,
// typically a memory store: a limit always applies, per instance of the
// service. If the fallback fails too, the descriptor passes.
func FallbackTo(store ratelimit.Store) FailurePolicy {
	if nilStore(store) {
		panic("ratelimit: envoy.FallbackTo(nil)")
	}
	return FailurePolicy{mode: failFallback, fallback: store}
}

// DividedBy returns a FallbackTo policy whose fallback applies each limit
// divided among instances (at least 1 request per unit), so that a fleet of
// that many service instances stays near the limit during an outage. It
// panics on a policy that is not a fallback or on fewer than 1 instance.
func (p FailurePolicy) DividedBy(instances int) FailurePolicy {
	if p.mode != failFallback || instances < 1 {
		panic(fmt.Sprintf("ratelimit: envoy DividedBy(%d) needs a FallbackTo policy and at least 1 instance", instances))
	}
	p.instances = instances
	return p
}

// share is l divided among the policy's instances.
func (p FailurePolicy) share(l ratelimit.Limit) ratelimit.Limit {
	if p.instances <= 1 {
		return l
	}
	return ratelimit.Limit{Rate: max(1, l.Rate/p.instances), Period: l.Period}
}

// String names the policy, as the command's -failure flag does.
func (p FailurePolicy) String() string {
	switch p.mode {
	case failClosed:
		return "closed"
	case failError:
		return "error"
	case failFallback:
		if p.instances > 1 {
			return fmt.Sprintf("fallback/%d", p.instances)
		}
		return "fallback"
	}
	return "open"
}

// nilStore reports whether s is nil, or a nil pointer (which an interface
// holding it does not compare equal to nil).
func nilStore(s ratelimit.Store) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
