package ratelimit

import (
	"fmt"
	"net/http"
	"time"
)

// Plan is what a tier grants a tenant. Zero fields grant nothing of that kind
// (no rate limit, no quota, no concurrency cap).
type Plan struct {
	Rate        Limit
	Quota       Quota
	Concurrency int // requests in flight

	// SlotTimeout is how long a concurrency slot lives if the instance
	// holding it dies without releasing it (with Redis); a minute when zero.
	// It must exceed the longest request.
	SlotTimeout time.Duration
}

// Tiers returns the rules of a tiered API: each request's tier, from
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
func Tiers(name string, tenant KeyFunc, resolve func(*http.Request) (tier string, ok bool), plans map[string]Plan) []Rule {
	if tenant == nil || resolve == nil || len(plans) == 0 {
		panic("ratelimit: Tiers needs a tenant key, a resolver and at least one plan")
	}
	plans = clonePlans(plans)
	for tier, p := range plans {
		if p.Rate != (Limit{}) {
			if err := p.Rate.Validate(); err != nil {
				panic(fmt.Sprintf("ratelimit: Tiers: plan %q: %v", tier, err))
			}
		}
		if p.Concurrency < 0 || (!p.Quota.IsZero() && p.Quota.n <= 0) {
			panic(fmt.Sprintf("ratelimit: Tiers: plan %q: negative concurrency or quota", tier))
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
			return "", fmt.Errorf("%w: no plan for this request's tier", ErrNoKey)
		}
		return tenant(r)
	}
	rateKey := func(r *http.Request) (string, error) {
		tier, ok := resolve(r)
		if _, known := plans[tier]; !ok || !known {
			return "", fmt.Errorf("%w: no plan for this request's tier", ErrNoKey)
		}
		k, err := tenant(r)
		return tier + "\x00" + k, err
	}
	return []Rule{
		{Name: name + "-rate", Key: rateKey, KeyKind: "tenant", LimitFunc: func(r *http.Request) (Limit, bool) {
			p, ok := plan(r)
			return p.Rate, ok && p.Rate != (Limit{})
		}},
		{Name: name + "-quota", Key: key, KeyKind: "tenant", Algorithm: FixedWindow, QuotaFunc: func(r *http.Request) (Quota, bool) {
			p, ok := plan(r)
			return p.Quota, ok && !p.Quota.IsZero()
		}},
		{Name: name + "-concurrency", Key: key, KeyKind: "tenant", Algorithm: Concurrency, LimitFunc: func(r *http.Request) (Limit, bool) {
			p, ok := plan(r)
			slot := p.SlotTimeout
			if slot <= 0 {
				slot = time.Minute
			}
			return Limit{Rate: p.Concurrency, Period: slot}, ok && p.Concurrency > 0
		}},
	}
}

func clonePlans(m map[string]Plan) map[string]Plan {
	out := make(map[string]Plan, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
