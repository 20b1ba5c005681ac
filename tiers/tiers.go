// Package tiers builds the rules of a tiered API, where each tenant's plan
// (free, pro, enterprise) grants it a rate, a calendar quota and a cap on
// requests in flight, looked up on every request.
package tiers

import (
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit"
)

// Plan is what a tier grants a tenant. Zero fields grant nothing of that kind
// (no rate limit, no quota, no concurrency cap).
type Plan struct {
	Rate        ratelimit.Limit
	Quota       ratelimit.Quota
	Concurrency int // requests in flight

	// SlotTimeout is how long a concurrency slot lives if the instance
	// holding it dies without releasing it (with Redis); a minute when zero.
	// It must exceed the longest request.
	SlotTimeout time.Duration
}

// Rules returns the rules of a tiered API: each request's tier, from
// resolve, picks its Plan, and the tenant key counts against that plan's
// rate, quota and concurrency cap (rules "<name>-rate", "<name>-quota",
// "<name>-concurrency"). Because the plan is looked up on every request, a
// tenant whose plan changes gets the new limits on its next request. Quota
// usage and requests in flight carry over; the rate bucket is kept per tenant
// and tier, so a new plan starts with a full bucket (GCRA state is time, and
// a debt under one rate would misread under another). A request whose tier is
// unknown or not in plans is rejected by the key-error policy, never let
// through unlimited. resolve runs several times per request (for each rule's
// key and limit): make it cheap, for example by reading the tenant's plan
// from the request context where authentication put it.
//
// It panics with a "ratelimit: tiers.Rules: ..." message without a tenant
// key, a resolver or a plan, and on a plan with an invalid rate or quota or
// a negative concurrency cap.
func Rules(name string, tenant ratelimit.KeyFunc, resolve func(*http.Request) (tier string, ok bool), plans map[string]Plan) []ratelimit.Rule {
	if tenant == nil || resolve == nil || len(plans) == 0 {
		panic("ratelimit: tiers.Rules needs a tenant key, a resolver and at least one plan")
	}
	plans = maps.Clone(plans)
	for tier, p := range plans {
		if !isZero(p.Rate) {
			if err := p.Rate.Validate(); err != nil {
				panic(fmt.Sprintf("ratelimit: tiers.Rules: plan %q: %v", tier, err))
			}
		}
		if !p.Quota.IsZero() {
			if err := p.Quota.Validate(); err != nil {
				panic(fmt.Sprintf("ratelimit: tiers.Rules: plan %q: %v", tier, err))
			}
		}
		if p.Concurrency < 0 {
			panic(fmt.Sprintf("ratelimit: tiers.Rules: plan %q: negative concurrency %d", tier, p.Concurrency))
		}
	}
	plan := func(r *http.Request) (Plan, bool) {
		tier, ok := resolve(r)
		if !ok {
			return Plan{}, false
		}
		p, ok := plans[tier]
		return p, ok
	}
	// The tier must resolve for the request to be keyed at all: an unknown
	// tier fails the key, so the key-error policy applies.
	key := func(r *http.Request) (string, error) {
		if _, ok := plan(r); !ok {
			return "", fmt.Errorf("%w: no plan for this request's tier", ratelimit.ErrNoKey)
		}
		return tenant(r)
	}
	rateKey := func(r *http.Request) (string, error) {
		tier, ok := resolve(r)
		if _, known := plans[tier]; !ok || !known {
			return "", fmt.Errorf("%w: no plan for this request's tier", ratelimit.ErrNoKey)
		}
		k, err := tenant(r)
		return tier + "\x00" + k, err
	}
	return []ratelimit.Rule{
		{Name: name + "-rate", Key: rateKey, KeyKind: "tenant", LimitFunc: func(r *http.Request) (ratelimit.Limit, bool) {
			p, ok := plan(r)
			return p.Rate, ok && !isZero(p.Rate)
		}},
		{Name: name + "-quota", Key: key, KeyKind: "tenant", Algorithm: ratelimit.FixedWindow, QuotaFunc: func(r *http.Request) (ratelimit.Quota, bool) {
			p, ok := plan(r)
			return p.Quota, ok && !p.Quota.IsZero()
		}},
		{Name: name + "-concurrency", Key: key, KeyKind: "tenant", Algorithm: ratelimit.Concurrency, LimitFunc: func(r *http.Request) (ratelimit.Limit, bool) {
			p, ok := plan(r)
			slot := p.SlotTimeout
			if slot <= 0 {
				slot = time.Minute
			}
			return ratelimit.Limit{Rate: p.Concurrency, Period: slot}, ok && p.Concurrency > 0
		}},
	}
}

// isZero reports whether l is unset.
func isZero(l ratelimit.Limit) bool { return l == ratelimit.Limit{} }
