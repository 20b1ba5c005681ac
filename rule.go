package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/internal/fieldval"
	"github.com/sluicehq/ratelimit/internal/problem"
	"github.com/sluicehq/ratelimit/stores"
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

	// Cost, if set, is the number of units a request consumes, for example
	// 5 for a search; 1 when nil. Results below 1 count as 1: a request can
	// never cost nothing. A request that costs more than the limit's
	// capacity can never be admitted: it is denied at once, without
	// Retry-After, with a problem+json body saying so, and reported to
	// observers as CostExceeded.
	Cost func(r *http.Request) int

	// Shadow makes the rule report without enforcing: it counts requests and
	// sends ShadowDenied events, but never denies and never appears in the
	// response fields. For rolling out a new limit safely.
	Shadow bool

	// OnStoreError is what happens when the store cannot decide; fail open
	// when zero. See FailurePolicy.
	OnStoreError FailurePolicy

	// Store, if set, keeps this rule's state instead of the Limiter's store.
	Store Store

	// Pace, if its MaxDelay is set, delays the requests of a GCRA rule to its
	// rate instead of rejecting them; see Pace. An enforced rule only.
	Pace Pace

	// Settled makes the rule's cost (Cost, or 1) an estimate that the
	// handler settles with the actual cost once it knows it; see Settle.
	Settled bool

	// Adaptive, if set, makes the rule an adaptive concurrency limit, kept
	// per instance in memory: see package adaptive. Limit, LimitFunc, Quota,
	// QuotaFunc, Algorithm, Cost, OnStoreError and Store are then ignored.
	Adaptive *adaptive.Config
}

// Global returns a KeyFunc that puts every request in one bucket: a cap on
// the whole service (per instance with a memory store, for the fleet with
// Redis), usually stacked with per-client rules.
func Global() KeyFunc {
	return func(*http.Request) (string, error) { return "global", nil }
}

// rule is a compiled Rule.
type rule struct {
	Rule
	quotedName   string // the name as a Structured Fields string
	noKeyRule    string // the Rule of the shared bucket for keyless requests
	policyItem   string // precomputed RateLimit-Policy member of a static rule
	capacityText string
	problem      []byte // the 429 body naming this rule alone
	keyProblem   []byte
	onKeyError   KeyErrorPolicy
	static       bool                        // no LimitFunc, Quota or QuotaFunc
	local        bool                        // its store answers from process memory
	storeID      int                         // rules with the same store share an ID
	adaptive     atomic.Pointer[adaptiveSet] // set once compiled; a Reloadable may hand it an older one
	fast         *fastRule
	pacer        *pacer // with Pace.MaxDelay set
	window       atomic.Pointer[quotaCache]
	_            [56]byte // whole cache lines: see TestHotStateFillsWholeCacheLines
}

func compileRule(r Rule, c config) *rule {
	if r.Key == nil {
		panic(fmt.Sprintf("ratelimit: rule %q needs a KeyFunc, such as ByIP()", r.Name))
	}
	if r.KeyKind == "" {
		r.KeyKind = keyKindOf(r.Key)
	}
	if r.Name == "" {
		r.Name = defaultName(r)
	}
	if !fieldval.ValidName(r.Name) {
		panic(fmt.Sprintf("ratelimit: rule name %q: use 1-64 letters, digits or -_.:/", r.Name))
	}
	if r.Store == nil {
		r.Store = c.store
	} else {
		checkStore(fmt.Sprintf("rule %q: Store", r.Name), r.Store)
	}
	ru := &rule{
		Rule:       r,
		quotedName: strconv.Quote(r.Name),
		noKeyRule:  r.Name + "#nokey",
		onKeyError: c.onKeyError,
		static:     r.LimitFunc == nil && r.QuotaFunc == nil && r.Quota.IsZero(),
	}
	if ls, ok := r.Store.(stores.LocalStore); ok && ls.Local() {
		ru.local = true
	}
	switch {
	case r.Adaptive != nil:
		compileAdaptive(ru, c.clock)
	case !r.Quota.IsZero():
		if r.Quota.n <= 0 || r.Quota.n > stores.MaxCount || r.Quota.unit > month {
			panic(fmt.Sprintf("ratelimit: rule %q: invalid quota %+v", r.Name, r.Quota))
		}
		ru.Algorithm = FixedWindow
	case r.QuotaFunc != nil:
		ru.Algorithm = FixedWindow
	case r.LimitFunc == nil:
		probe := stores.Request{Limit: r.Limit, Algorithm: r.Algorithm, Cost: 1}
		if err := probe.Validate(); err != nil {
			panic(fmt.Sprintf("ratelimit: rule %q: %v", r.Name, strings.TrimPrefix(err.Error(), "ratelimit: ")))
		}
		ru.policyItem = policyItem(r.Name, r.Limit, r.Algorithm)
		ru.capacityText = strconv.Itoa(r.Limit.Capacity())
	}
	if r.Pace != (Pace{}) {
		compilePace(ru)
	}
	if r.Settled && (r.Adaptive != nil || ru.Algorithm == Concurrency) {
		panic(fmt.Sprintf("ratelimit: rule %q: a concurrency limit holds slots, it has no cost to settle", r.Name))
	}
	ru.problem = problem.Denied([]string{r.Name})
	ru.keyProblem = problem.NoKey(c.onKeyError.rejectStatus())
	return ru
}

// compilePace sets up a paced rule's waiting bounds, panicking on a pace
// its rule cannot honour.
func compilePace(ru *rule) {
	validatePace(ru.Pace, fmt.Sprintf("rule %q", ru.Name))
	switch {
	case ru.Pace.MaxDelay == 0:
		panic(fmt.Sprintf("ratelimit: rule %q: a Pace needs a MaxDelay", ru.Name))
	case ru.Adaptive != nil || ru.Algorithm != GCRA:
		panic(fmt.Sprintf("ratelimit: rule %q: only GCRA rules can be paced (got %v)", ru.Name, ru.Algorithm))
	case ru.Shadow:
		panic(fmt.Sprintf("ratelimit: rule %q: a shadow rule never delays requests; it cannot be paced", ru.Name))
	}
	ru.pacer = newPacer(ru.Pace)
}

// defaultName names a rule given no name (New without WithName, a Rule
// with an empty Name) after what it limits: key kind, rate, period, and
// the burst and algorithm when they are not the defaults, such as
// "ip-100-per-1m", "api_key-10-per-1s-burst-20-sliding-window" or
// "user-1000-per-day". Limiters nested around one handler therefore report
// distinct policies unless they limit the same key in the same way.
func defaultName(r Rule) string {
	var b strings.Builder
	b.WriteString(r.KeyKind)
	switch {
	case !r.Quota.IsZero():
		unit := map[calendarUnit]string{day: "day", week: "week", month: "month"}[r.Quota.unit]
		fmt.Fprintf(&b, "-%d-per-%s", r.Quota.n, unit)
	case r.LimitFunc != nil || r.QuotaFunc != nil:
		b.WriteString("-dynamic")
	default:
		fmt.Fprintf(&b, "-%d-per-%s", r.Limit.Rate, periodName(r.Limit.Period))
		if r.Limit.Burst != 0 && r.Limit.Burst != r.Limit.Rate {
			fmt.Fprintf(&b, "-burst-%d", r.Limit.Burst)
		}
	}
	if r.Algorithm != GCRA && r.Quota.IsZero() {
		b.WriteString("-" + r.Algorithm.String())
	}
	name := []byte(b.String())
	for i, ch := range name { // a KeyKind set by the user may hold anything
		if !fieldval.ValidName(string(ch)) {
			name[i] = '_'
		}
	}
	return string(name[:min(len(name), 64)])
}

// periodName writes d in the largest whole unit: "1s", "1m", "2h", "1d".
func periodName(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// use tells how a request relates to a rule.
type use uint8

const (
	applies      use = iota
	exempt           // the rule's LimitFunc or QuotaFunc exempted the request
	keyFailed        // the rule's KeyFunc failed
	overCapacity     // the request costs more than the rule's limit allows at once
)

// request builds in *req the store request for r under ru. The key comes first, so
// that a request without a key meets the key-error policy even under a rule
// that would exempt it.
func (ru *rule) request(r *http.Request, now time.Time, req *stores.Request) (use, error) {
	*req = stores.Request{Rule: ru.Name, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1}
	key, err := ru.Key(r)
	switch {
	case err != nil && !ru.onKeyError.Shared:
		return keyFailed, err
	case err != nil:
		req.Rule = ru.noKeyRule
	default:
		req.Key = compactKey(key)
	}
	if ru.LimitFunc != nil {
		limit, ok := ru.LimitFunc(r)
		if !ok {
			return exempt, nil
		}
		req.Limit = limit
	}
	quota := ru.Quota
	if ru.QuotaFunc != nil {
		q, ok := ru.QuotaFunc(r)
		if !ok {
			return exempt, nil
		}
		quota = q
	}
	if !quota.IsZero() {
		req.Limit, req.Window = ru.quotaWindow(quota, now)
	}
	if ru.Cost != nil {
		// A request costs at least 1; one that costs more than the limit
		// allows at once can never be admitted (see costExceeded).
		req.Cost = max(ru.Cost(r), 1)
		if c := req.Limit.Capacity(); c >= 1 && req.Cost > c {
			return overCapacity, nil
		}
	}
	return applies, nil
}
