package ratelimit

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit/internal/problem"
)

// FailurePolicy is what a rule does when its store cannot decide: Redis is
// down, slow past the time budget, or the circuit breaker is open. The zero
// value fails open.
//
//	policy                              the request                 guarantees
//	FailurePolicy{}                     passes, without fields      availability; no limit during the outage
//	FailurePolicy{Status: 503}          gets Status (429 or 503)    the limit is never exceeded; availability is lost
//	FailurePolicy{Fallback: store}      is checked against store    a limit always applies (a local one, per instance)
//
// A store error never becomes a 429 unless the rule fails closed with 429.
// NewRules panics on a policy with a Status other than 429 or 503, with
// both Status and Fallback, with Instances and no Fallback, or with a
// Fallback that is a nil pointer or a memory.Store not made by memory.New.
type FailurePolicy struct {
	// Status, if set, fails closed: the request is answered with Status,
	// http.StatusTooManyRequests or http.StatusServiceUnavailable, and an
	// RFC 9457 body (or WithErrorHandler's response).
	Status int

	// Fallback, if set, checks requests against this store while the rule's
	// own store fails, typically a memory store with the fleet limit
	// divided among instances (see Instances). If the fallback fails too,
	// the request passes.
	Fallback Store

	// Instances, when above 1, makes the Fallback apply the rule's limit
	// divided among that many instances: with a fleet limit of 1,000 a
	// minute and 8 instances, each falls back to 125 a minute (at least 1),
	// so the fleet as a whole stays near its limit during an outage. It
	// works with limits chosen per request (LimitFunc, tiers.Rules) too.
	Instances int
}

// failClosedType is the problem type of a fail-closed response, whichever
// Status the policy gives: temporary-reduced-capacity, which
// draft-ietf-httpapi-ratelimit-headers registers for requests that cannot
// be served for a temporary lack of capacity, here the limiter's. Not
// quota-exceeded: the request exceeded no quota, so the body names no
// violated policies.
const failClosedType = problem.ReducedCapacity

// failMode is what a FailurePolicy does.
type failMode uint8

const (
	failOpen failMode = iota
	failClosed
	failFallback
)

// mode is what p does.
func (p FailurePolicy) mode() failMode {
	switch {
	case p.Status != 0:
		return failClosed
	case p.Fallback != nil:
		return failFallback
	}
	return failOpen
}

// validate panics, naming rule, on a policy NewRules refuses.
func (p FailurePolicy) validate(rule string) {
	switch {
	case p.Status != 0 && p.Status != http.StatusTooManyRequests && p.Status != http.StatusServiceUnavailable:
		panic(fmt.Sprintf("ratelimit: rule %q: OnStoreError.Status %d: use 429 or 503", rule, p.Status))
	case p.Status != 0 && p.Fallback != nil:
		panic(fmt.Sprintf("ratelimit: rule %q: OnStoreError has both a Status and a Fallback: pick one", rule))
	case p.Instances < 0 || (p.Instances > 0 && p.Fallback == nil):
		panic(fmt.Sprintf("ratelimit: rule %q: OnStoreError.Instances %d needs a Fallback and at least 1 instance", rule, p.Instances))
	case p.Fallback != nil:
		checkStore(fmt.Sprintf("rule %q: OnStoreError.Fallback", rule), p.Fallback)
	}
}

// share returns l divided among the policy's instances.
func (p FailurePolicy) share(l Limit) Limit {
	if p.Instances <= 1 {
		return l
	}
	out := Limit{Rate: max(1, l.Rate/p.Instances), Period: l.Period}
	if l.Burst != 0 {
		out.Burst = max(1, l.Burst/p.Instances)
	}
	return out
}

// String describes the policy for events and logs.
func (p FailurePolicy) String() string {
	switch p.mode() {
	case failClosed:
		return fmt.Sprintf("fail-closed(%d)", p.Status)
	case failFallback:
		if p.Instances > 1 {
			return fmt.Sprintf("fallback(1/%d)", p.Instances)
		}
		return "fallback"
	}
	return "fail-open"
}
