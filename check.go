package ratelimit

import (
	"context"
	"fmt"
	"github.com/sluicehq/ratelimit/stores"
	"net/http"
	"time"
)

// Check decides on r under every rule of the limiter and returns the
// verdict without writing anything: units are consumed as by the
// middleware, but the response is the caller's. Call Write to answer (the
// rate-limit fields, and the 429, 503 or 4xx response when the request may
// not proceed) and, when Allowed, Done once the request has been served.
// Framework adapters build on Check, or on CheckRoute when their router
// has matched a route (ServeRoute runs the whole request path on it);
// with net/http, use Handler.
func (l *Limiter) Check(r *http.Request) Verdict {
	var v Verdict
	l.check(r, routing{}, nil, &v)
	return v
}

// CheckRoute is Check for a request the router has already matched: route
// is the pattern of the route it matched for the request's method, as the
// router spells it ("/healthz", "/users/:id", "/*"), or "" when it matched
// none (404, 405) or has not routed yet. A GET or HEAD request is carved
// out when route is exactly a carve-out path; the request's path is not
// read, so escapes, doubled slashes and catch-all routes cannot pass for a
// carve-out. See docs/carve-outs.md.
func (l *Limiter) CheckRoute(r *http.Request, route string) Verdict {
	var v Verdict
	l.check(r, routing{route: route, routed: true}, nil, &v)
	return v
}

// check is decideAsking for a request that is not skipped: the whole
// decision on r, routed as rt says, asking ask (if not nil) what a store
// failure does.
func (l *Limiter) check(r *http.Request, rt routing, ask *askOnError, v *Verdict) {
	if l.skip(r, rt) {
		l.observers.observe(Event{Outcome: OutcomeSkipped, Request: r})
		return
	}
	if f := l.direct(); f != nil && l.checkDirect(f, r, v) {
		return
	}
	if s := l.stack; s != nil && s.check(r, v) {
		return
	}
	l.decideAsking(r, v, ask)
}

// decide sets *v, the zero Verdict, to the verdict on r: it applies the
// adaptive rules, then the others. A request rejected by an adaptive rule
// never reaches the stores; one stopped by another rule gives its adaptive
// slots back unsampled. (Verdicts are filled in place rather than returned:
// they are large enough for the copies to show on the request path.)
func (l *Limiter) decide(r *http.Request, v *Verdict) { l.decideAsking(r, v, nil) }

// decideAsking is decide; with ask, the first store failure of an enforced
// rule asks ask what to do, whatever the rule's FailurePolicy, at the moment
// it happens (see askOnError).
func (l *Limiter) decideAsking(r *http.Request, v *Verdict, ask *askOnError) {
	if l.adaptive == nil {
		l.decideAfter(r, nil, v, ask)
		return
	}
	var adv adaptiveDone // on the stack: hold copies it for an admitted request
	if !l.acquireAdaptive(r, v, &adv) {
		return
	}
	ad := &adv
	settled := false
	defer func() {
		if !settled { // a KeyFunc, LimitFunc, CostFunc or store panicked
			ad.release(false, 0)
		}
	}()
	l.decideAfter(r, ad, v, ask)
	settled = true
}

// decideAfter is decideAsking once the adaptive rules, if any, have
// admitted r (ad holds their slots).
func (l *Limiter) decideAfter(r *http.Request, ad *adaptiveDone, v *Verdict, ask *askOnError) {
	var now time.Time
	if l.needNow {
		now = l.clock.Now()
	}
	if len(l.rules) <= 1 {
		if l.rules == nil && ad == nil { // the zero Limiter
			*v = Verdict{l: l, r: r, kind: verdictMisconfigured, err: errZeroLimiter}
			return
		}
		var one [1]ruleVerdict
		d := decision{ctx: r.Context(), r: r, now: now}
		l.decideRules(&d, one[:0], ad, v, ask)
		return
	}
	b := l.getBatch()
	defer l.putBatch(b)
	d := decision{ctx: r.Context(), r: r, now: now, scratch: &b.scratch}
	l.decideRules(&d, b.rvs[:0], ad, v, ask)
}

// decideRules builds each rule's request for d.r and settles them.
func (l *Limiter) decideRules(d *decision, rvs []ruleVerdict, ad *adaptiveDone, v *Verdict, ask *askOnError) {
	for i, ru := range l.rules {
		n := len(rvs)
		rvs = rvs[:n+1]
		rv := &rvs[n]
		rv.ru, rv.call = ru, -1
		use, err := ru.request(d.r, d.now, &rv.req)
		req := &rv.req
		switch use {
		case exempt:
			rvs = rvs[:n]
			continue
		case keyFailed:
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: d.r})
			if ru.Shadow {
				rvs = rvs[:n]
				continue // a shadow rule never denies
			}
			ad.release(false, 0)
			*v = Verdict{l: l, r: d.r, kind: verdictKeyError, top: ru, err: err}
			return
		case overCapacity:
			err := l.costExceeded(d.r, ru, req)
			if ru.Shadow {
				rvs = rvs[:n]
				continue
			}
			ad.release(false, 0)
			*v = Verdict{l: l, r: d.r, kind: verdictCostExceeded, top: ru, res: Result{Limit: req.Limit}, limit: req.Limit, cost: req.Cost, err: err}
			return
		}
		if i < l.enforced {
			d.enforced = len(rvs)
		}
	}
	if l.paced {
		l.settlePaced(d, rvs, ad, v, ask)
		return
	}
	l.settle(d, rvs, ad, v, ask)
}

// costExceeded reports, and returns the error of, a request that costs
// more than ru's limit allows at once. Such a request can never be
// admitted, at any time, so it is denied without asking the store (nothing
// is consumed) and without Retry-After: waiting cannot help.
func (l *Limiter) costExceeded(r *http.Request, ru *rule, req *stores.Request) error {
	err := fmt.Errorf("%w: cost %d exceeds the capacity %d of rule %q", ErrInvalidRequest, req.Cost, req.Limit.Capacity(), ru.Name)
	l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeCostExceeded, Result: Result{Limit: req.Limit}, Err: err, Request: r})
	return err
}

// settlePaced is settle for a limiter with paced rules: each takes a
// waiting place for the request, if one is free, until it is decided and,
// when admitted with a delay, has waited. Callers choose between the two,
// so that the path without pacing has no call more.
func (l *Limiter) settlePaced(d *decision, rvs []ruleVerdict, ad *adaptiveDone, v *Verdict, ask *askOnError) {
	l.enterPace(d, rvs)
	defer leavePace(d, rvs)
	l.settle(d, rvs, ad, v, ask)
}

// settle asks the stores about d's requests, enforced rules first, and
// makes the verdict *v.
// The calls that have nothing to do are skipped here rather than entered:
// with one rule, the request path is little more than this function.
func (l *Limiter) settle(d *decision, rvs []ruleVerdict, ad *adaptiveDone, v *Verdict, ask *askOnError) {
	stop, denied := l.takeEnforced(d, rvs, ask)
	if (stop >= 0 || denied) && d.enforced > 1 { // with one, nothing was consumed
		l.compensate(d, rvs)
	}
	if stop >= 0 {
		if ad != nil {
			ad.release(false, 0)
		}
		l.stopped(d, rvs, stop, v)
		return
	}
	shadows := len(rvs) > d.enforced
	if shadows {
		l.takeShadow(d, rvs)
	}
	l.conclude(d, rvs, denied, v)
	if !v.Allowed() {
		if ad != nil {
			ad.release(false, 0)
		}
		if shadows {
			l.releaseShadow(d, rvs)
		}
		return
	}
	if l.paced { // without a waiting place (AllowAtMost) nothing was reserved to wait for
		waited, ok := l.wait(d, rvs)
		if !ok {
			if ad != nil {
				ad.release(false, 0)
			}
			*v = Verdict{l: l, r: d.r, kind: verdictCanceled, top: v.top, res: v.res, limit: v.limit,
				err: fmt.Errorf("ratelimit: the request ended while waiting for its turn: %w", context.Cause(d.ctx))}
			return
		}
		v.res.ResetAfter = max(0, v.res.ResetAfter-waited) // the fields describe the moment it is served
	}
	if d.r != nil && (l.slots || l.settled || ad != nil) {
		v.held = l.hold(d, rvs, ad)
	}
}

// takeEnforced asks the stores about the enforced rules: one call per
// store, cheapest stores first, stopping at the first denial so that
// costlier stores are not asked. stop is the index of a rule whose store
// failure stops the request, or -1.
func (l *Limiter) takeEnforced(d *decision, rvs []ruleVerdict, ask *askOnError) (stop int, denied bool) {
	stop = -1
	for g := 0; g < d.enforced && !denied && stop < 0; g++ {
		if rvs[g].state != pending {
			continue
		}
		err := l.takeGroup(d, rvs, g)
		for i := g; i < d.enforced; i++ {
			rv := &rvs[i]
			if rv.call != g {
				continue
			}
			if err == nil {
				rv.state = decided
			} else if rv.call = -1; l.fail(d, rv, err, ask) && stop < 0 {
				stop = i
			}
			denied = denied || rv.state == decided && !rv.res.Allowed
		}
	}
	return stop, denied
}

// takeGroup asks the store of enforced rule g about every pending enforced
// request on the same store, in one all-or-nothing call, marking them with
// call g and setting their results and latency.
func (l *Limiter) takeGroup(d *decision, rvs []ruleVerdict, g int) error {
	rvs = rvs[:d.enforced]
	k := 0
	for i := g; i < len(rvs); i++ {
		if rvs[i].state == pending && rvs[i].ru.storeID == rvs[g].ru.storeID {
			rvs[i].call = g
			k++
		}
	}
	ctx := d.ctx
	if l.timeout > 0 { // as budget, without a call to a no-op on every request
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	start := l.observers.start()
	var err error
	if k == 1 {
		rvs[g].res, err = rvs[g].ru.Store.Take(ctx, rvs[g].req)
		rvs[g].lat = since(start)
		return err
	}
	sc, j := d.scratch, 0
	for i := g; i < len(rvs); i++ {
		if rvs[i].call == g {
			sc.reqs[j] = rvs[i].req
			j++
		}
	}
	err = rvs[g].ru.Store.TakeAll(ctx, sc.reqs[:k], sc.res[:k])
	lat := since(start)
	j = 0
	for i := g; i < len(rvs); i++ {
		if rvs[i].call == g {
			rvs[i].res, rvs[i].lat = sc.res[j], lat
			j++
		}
	}
	return err
}

// takeShadow counts the request under the shadow rules, which never deny.
func (l *Limiter) takeShadow(d *decision, rvs []ruleVerdict) {
	for i := d.enforced; i < len(rvs); i++ {
		rv := &rvs[i]
		ctx, cancel := l.budget(d.ctx)
		start := l.observers.start()
		res, err := rv.ru.Store.Take(ctx, rv.req)
		cancel()
		rv.lat = since(start)
		if err != nil {
			l.fail(d, rv, err, nil) // a shadow rule's failure asks nothing
		} else {
			rv.res, rv.state = res, decided
		}
		if rv.state == decided {
			l.observers.result(d.r, rv.ru, rv.res, OutcomeShadowDenied, rv.lat)
		}
	}
}

// stopped is the verdict on a request that rule stop's store failure
// stops. The rules that their stores decided before still report their
// decisions, as they do when another rule denies.
func (l *Limiter) stopped(d *decision, rvs []ruleVerdict, stop int, v *Verdict) {
	if len(l.observers) > 0 {
		for i := range rvs[:d.enforced] {
			if rv := &rvs[i]; rv.answered() {
				l.observers.result(d.r, rv.ru, rv.res, OutcomeDenied, rv.lat)
			}
		}
	}
	rv := &rvs[stop]
	*v = Verdict{l: l, r: d.r, kind: verdictFailedClosed, top: rv.ru, limit: rv.req.Limit, err: rv.err}
	if rv.state == misconfigured {
		v.kind = verdictMisconfigured
	}
}

// conclude reports the enforced rules' decisions and makes the verdict on
// them: the most restrictive rule's result, every policy, and on a denial
// every rule that denied.
func (l *Limiter) conclude(d *decision, rvs []ruleVerdict, denied bool, v *Verdict) {
	top := -1
	var failed error
	for i := range rvs[:d.enforced] {
		rv := &rvs[i]
		if !rv.answered() {
			if failed == nil && rv.state == failedOpen {
				failed = rv.err
			}
			continue
		}
		if len(l.observers) > 0 {
			l.observers.result(d.r, rv.ru, rv.res, OutcomeDenied, rv.lat)
		}
		if top < 0 || reportedBefore(rv, &rvs[top]) {
			top = i
		}
	}
	if top < 0 {
		v.l, v.r, v.err = l, d.r, failed // every rule exempted or failed open
		return
	}
	// Pointer fields are set only when not zero (v is): each store through
	// v costs a write barrier while the GC marks.
	t := &rvs[top]
	v.l, v.r, v.kind, v.top, v.res, v.limit = l, d.r, verdictAllowed, t.ru, t.res, t.req.Limit
	if l.needNow {
		v.now = d.now
	}
	if p := l.policy(d, rvs); p != "" {
		v.policy = p
	}
	if failed != nil { // a store failed, whether or not another rule denied
		v.err = failed
	}
	if !denied {
		return
	}
	v.kind = verdictDenied
	for i := range rvs[:d.enforced] {
		if rv := &rvs[i]; i != top && rv.state == decided && !rv.res.Allowed {
			if v.violated == nil {
				v.violated = []string{t.ru.Name}
			}
			v.violated = append(v.violated, rv.ru.Name)
		}
	}
}

// reportedBefore reports whether a's result is reported rather than b's:
// the more restrictive, except that an allowed Concurrency rule gives way
// to an allowed rate rule. Free slots are requests in flight, not quota
// left in a window: two slots left says nothing about the next minute,
// and a client reading it as a rate would wait for nothing. Between
// allowed rules with as much quota left, the one whose next unit comes
// back later is reported, so that its t (nextAfter) holds for the request:
// the other rule has a unit back by then too. (The later full bucket,
// ResetAfter, may come back sooner: a spent GCRA key of PerMinute(4) is
// full in 60 s with a unit back in 15 s.)
func reportedBefore(a, b *ruleVerdict) bool {
	if a.res.Allowed && b.res.Allowed {
		if ac, bc := a.ru.Algorithm == Concurrency, b.ru.Algorithm == Concurrency; ac != bc {
			return bc
		}
		if a.res.Remaining == b.res.Remaining {
			na := nextAfter(&a.res, a.ru.Algorithm, a.req.Limit)
			if nb := nextAfter(&b.res, b.ru.Algorithm, b.req.Limit); na != nb {
				return na > nb
			}
		}
	}
	return moreRestrictive(&a.res, &b.res)
}
