package ratelimit

import (
	"fmt"
	"net/http"
	"time"
)

// Rule is one limit of a Limiter: what to count, by which key, and what to
// do when its store fails. A Limiter with several rules checks them all on
// every request and admits it only if every enforced rule allows it; a
// denial by one rule consumes nothing from the others.
type Rule struct {
	// Name is the policy name in the RateLimit fields, the problem body and
	// metrics, and it keys the rule's state: 1–64 letters, digits or "-_.:/".
	// When empty, it is made from the key kind and the limit: key kind,
	// rate, period, and burst and algorithm when not the defaults, such as
	// "ip-100-per-1m" or "api_key-10-per-1s-burst-20-sliding-window"
	// (quotas: "user-1000-per-day"; LimitFunc and QuotaFunc rules:
	// "<kind>-dynamic").
	Name string

	// Limit is the rule's limit. For a Concurrency rule, Limit.Rate is the
	// number of requests in flight and Limit.Period how long a slot lives if
	// its holder crashes. Ignored when Quota is set.
	Limit Limit

	// LimitFunc, if set, picks the limit per request, for example from the
	// tenant's plan; it is called on every request, so a plan change takes
	// effect on the next one. ok=false exempts the request from this rule.
	LimitFunc func(r *http.Request) (limit Limit, ok bool)

	// Quota, if set, makes the rule a calendar quota (a fixed window of a
	// day, a week or a month in a time zone) instead of a rate.
	Quota Quota

	// QuotaFunc, if set, picks the quota per request, like LimitFunc.
	QuotaFunc func(r *http.Request) (quota Quota, ok bool)

	// Key extracts the bucket key; see the By... functions.
	Key KeyFunc

	// KeyKind labels the key in metrics and events ("ip", "tenant", ...);
	// never the key itself. When empty, the kind of a built-in key
	// function ("ip", "client_ip", "header", "user", "route", "bearer",
	// "api_key"), or "key" for Keys and functions of your own.
	KeyKind string

	// Algorithm counts the events; GCRA unless set (FixedWindow for quotas).
	Algorithm Algorithm

	// Cost, if set, is the number of units a request consumes; 1 when nil.
	// Results below 1 count as 1; a request whose cost exceeds the limit's
	// capacity is denied (see WithCostFunc).
	Cost func(r *http.Request) int

	// Shadow makes the rule report without enforcing: it counts requests and
	// sends ShadowDenied events, but never denies and never appears in the
	// response fields. For rolling out a new limit safely.
	Shadow bool

	// OnStoreError is what happens when the store cannot decide; FailOpen
	// when zero. See FailurePolicy.
	OnStoreError FailurePolicy

	// Store, if set, keeps this rule's state instead of the Limiter's store.
	Store Store

	// Adaptive, if set, makes the rule an adaptive concurrency limit, kept
	// per instance in memory: see Adaptive. Limit, LimitFunc, Quota,
	// QuotaFunc, Algorithm, Cost, OnStoreError and Store are then ignored.
	Adaptive *Adaptive
}

// Quota is a calendar quota: N events per day, week or month, with windows
// that start at midnight in Location. Windows follow the calendar, so a day
// with a daylight-saving change is 23 or 25 hours long.
//
// Window bounds are computed from the limiter's clock (each instance's own,
// also with Redis), so keep instance clocks synchronised.
type Quota struct {
	N        int
	Unit     CalendarUnit
	Location *time.Location // nil means UTC
}

// CalendarUnit is the length of a Quota's window.
type CalendarUnit uint8

// The calendar units of a Quota.
const (
	Day  CalendarUnit = iota + 1
	Week              // starting on Monday
	Month
)

// Daily returns a quota of n events per calendar day in loc (nil: UTC).
func Daily(n int, loc *time.Location) Quota { return Quota{N: n, Unit: Day, Location: loc} }

// Weekly returns a quota of n events per calendar week (from Monday) in loc.
func Weekly(n int, loc *time.Location) Quota { return Quota{N: n, Unit: Week, Location: loc} }

// Monthly returns a quota of n events per calendar month in loc.
func Monthly(n int, loc *time.Location) Quota { return Quota{N: n, Unit: Month, Location: loc} }

// IsZero reports whether q is unset.
func (q Quota) IsZero() bool { return q.Unit == 0 }

// quotaWindow returns the store request's limit and window for q at now:
// the window containing now and the bounds of its neighbours, so that a
// store on its own clock can pick the window that contains its time.
func quotaWindow(q Quota, now time.Time) (Limit, Window) {
	start, end := q.Window(now)
	prev, _ := q.Window(start.Add(-1))
	_, next := q.Window(end)
	return Limit{Rate: q.N, Period: end.Sub(start)},
		Window{Start: start.UnixNano(), End: end.UnixNano(), PrevStart: prev.UnixNano(), NextEnd: next.UnixNano()}
}

// Window returns the bounds [start, end) of the window containing t.
func (q Quota) Window(t time.Time) (start, end time.Time) {
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	switch q.Unit {
	case Week:
		d -= (int(t.Weekday()) + 6) % 7
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case Month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		return start, time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		return start, time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
}

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
		if !p.Rate.isZero() {
			if err := p.Rate.Validate(); err != nil {
				panic(fmt.Sprintf("ratelimit: Tiers: plan %q: %v", tier, err))
			}
		}
		if p.Concurrency < 0 || (!p.Quota.IsZero() && p.Quota.N <= 0) {
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
			return p.Rate, ok && !p.Rate.isZero()
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

func (l Limit) isZero() bool { return l == Limit{} }

// Global returns a KeyFunc that puts every request in one bucket: a cap on
// the whole service (per instance with a memory store, for the fleet with
// Redis), usually stacked with per-client rules.
func Global() KeyFunc {
	return func(*http.Request) (string, error) { return "global", nil }
}
