package ratelimit

import (
	"net/http"
	"time"
)

// Outcome is what happened to a request under one rule.
type Outcome uint8

// The outcomes reported to an Observer.
const (
	OutcomeAllowed      Outcome = iota // the rule admitted the request
	OutcomeDenied                      // the rule denied it (the response is a 429)
	OutcomeShadowDenied                // a shadow rule would have denied it; it was admitted
	OutcomeSkipped                     // carved out or skipped by a predicate; no rule ran
	OutcomeKeyError                    // no key could be extracted; the key-error policy applied
	OutcomeStoreError                  // the store failed; the rule's FailurePolicy applied
	OutcomeFallback                    // the store failed and the fallback store decided (its Allowed or Denied follows)
	OutcomeCostExceeded                // the request costs more than the rule's capacity: never admissible, denied without a store call (a shadow rule only reports it)
	numOutcomes
)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "skipped", "key_error", "store_error", "fallback", "cost_exceeded"}

// String returns the outcome's metrics label, e.g. "shadow_denied".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event describes one rule's decision on one request. Its fields are safe
// to use as metric labels (bounded): the key itself is never included.
//
// Each rule reports its own decision: with several rules, a rule that
// allowed a request reports Allowed even when another rule denied it (and
// nothing was consumed). A Fallback event is followed by the fallback
// store's Allowed or Denied event for the same request, both carrying the
// failed call's latency: count latency from one of them. Skipped events
// carry no rule.
type Event struct {
	Rule    string        // the rule's name
	KeyKind string        // the rule's KeyKind, e.g. "ip"
	Outcome Outcome       // what happened
	Result  Result        // the store's result, when it decided
	Latency time.Duration // real time spent in the store call (shared by the rules of one call); 0 without a store call
	Err     error         // for KeyError, StoreError, Fallback and CostExceeded (wraps ErrInvalidRequest)
	Request *http.Request // the request; do not retain it
}

// Observer receives an Event for every decision of a Limiter. Observe is
// called synchronously on the request path, possibly concurrently: keep it
// fast and safe for concurrent use.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// observers are a Limiter's observers.
type observers []Observer

func (os observers) observe(e Event) {
	for _, o := range os {
		o.Observe(e)
	}
}

// result reports a decision; deniedAs is the outcome of a denial
// (OutcomeDenied, or OutcomeShadowDenied for a shadow rule).
func (os observers) result(r *http.Request, ru *rule, res Result, deniedAs Outcome, lat time.Duration) {
	if len(os) == 0 {
		return
	}
	o := OutcomeAllowed
	if !res.Allowed {
		o = deniedAs
	}
	os.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: o, Result: res, Latency: lat, Request: r})
}

// start and since measure store latency for observers, in real time, and
// only when someone observes: reading the clock is not free.
func (os observers) start() time.Time {
	if len(os) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return max(time.Since(start), 1) // an observed call never reports zero
}
