package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// batch holds one request's work under several rules. Batches are pooled:
// the multi-rule path allocates only what it must keep.
type batch struct {
	n     int
	rules [MaxRules]*rule
	reqs  [MaxRules]Request
	res   [MaxRules]Result
	state [MaxRules]ruleState
	lat   [MaxRules]time.Duration // store latency, when observed
	// by is the store that decided each request (a fallback's if the rule's
	// store failed) and call the store call that decided it: requests of
	// one call were all-or-nothing; -1 for a call of its own.
	by   [MaxRules]Store
	call [MaxRules]int
	// Scratch for one store call, which needs contiguous slices.
	greqs [MaxRules]Request
	gres  [MaxRules]Result
	gidx  [MaxRules]int
}

// ruleState is what became of one rule's request.
type ruleState uint8

const (
	pending  ruleState = iota // not sent (a cheaper rule already denied)
	decided                   // res holds the store's (or fallback's) decision
	openFail                  // the store failed and the rule failed open
	consumed                  // decided, allowed, and later undone by compensation
)

func (b *batch) add(ru *rule, req Request) {
	b.rules[b.n], b.reqs[b.n], b.res[b.n], b.state[b.n] = ru, req, Result{}, pending
	b.by[b.n], b.call[b.n] = ru.Store, -1
	b.n++
}

func (l *Limiter) admitMany(w http.ResponseWriter, r *http.Request) (func(), bool) {
	b := l.batches.Get().(*batch)
	defer l.putBatch(b)
	var now time.Time
	if l.needNow {
		now = l.clock.Now()
	}
	enforced := 0
	for i, ru := range l.rules {
		req, use, err := ru.request(r, now)
		switch {
		case use == exempt:
			continue
		case use == keyFailed && ru.Shadow:
			l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
			continue // a shadow rule never denies
		case use == keyFailed:
			return l.keyFailed(w, r, ru, err)
		case use == overCapacity && ru.Shadow:
			l.costExceeded(w, r, ru, &req)
			continue
		case use == overCapacity:
			return l.costExceeded(w, r, ru, &req)
		}
		b.add(ru, req)
		if i < l.enforced {
			enforced = b.n
		}
	}

	// Enforced rules, one store call per store, cheapest stores first; stop
	// at the first denial so that costlier stores are not asked.
	denied := false
	for g := 0; g < enforced && !denied; g++ {
		if b.state[g] != pending {
			continue
		}
		k := 0
		for i := g; i < enforced; i++ {
			if b.state[i] == pending && b.rules[i].storeID == b.rules[g].storeID {
				b.gidx[k], b.greqs[k] = i, b.reqs[i]
				k++
			}
		}
		start := l.startTimer()
		err := l.takeGroup(r.Context(), b.rules[g].Store, b.greqs[:k], b.gres[:k])
		lat := l.since(start)
		for j := 0; j < k; j++ {
			i := b.gidx[j]
			b.lat[i] = lat
			if err != nil {
				res, by, proceed, ferr := l.storeFailed(w, r, b.rules[i], &b.reqs[i], err, lat)
				switch {
				case ferr == nil:
					b.res[i], b.state[i], b.by[i] = res, decided, by
				case proceed:
					b.state[i] = openFail
				default: // failed closed: the response is written
					l.compensate(r, b, enforced)
					return noop, false
				}
			} else {
				b.res[i], b.state[i], b.call[i] = b.gres[j], decided, g
			}
			denied = denied || (b.state[i] == decided && !b.res[i].Allowed)
		}
	}
	if denied {
		l.compensate(r, b, enforced)
	}

	// Shadow rules count on their own and never deny.
	for i := enforced; i < b.n; i++ {
		ru := b.rules[i]
		start := l.startTimer()
		res, err := l.take(r, ru, &b.reqs[i])
		lat := l.since(start)
		if err != nil {
			fres, by, _, ferr := l.storeFailed(w, r, ru, &b.reqs[i], err, lat)
			if ferr != nil {
				continue
			}
			res, b.by[i] = fres, by
		}
		b.res[i], b.state[i] = res, decided
		l.observeResult(r, ru, res, OutcomeShadowDenied, lat)
	}

	top := -1
	for i := 0; i < enforced; i++ {
		if b.state[i] == pending || b.state[i] == openFail {
			continue
		}
		l.observeResult(r, b.rules[i], b.res[i], OutcomeDenied, b.lat[i])
		if top < 0 || moreRestrictive(&b.res[i], &b.res[top]) {
			top = i
		}
	}
	if top < 0 {
		return l.multiReleaser(r, b), true // every rule exempted or failed open
	}
	policy := l.policyHeader
	for i := 0; i < enforced && policy != ""; i++ {
		if b.reqs[i].Limit != b.rules[i].Limit {
			policy = "" // a fallback decided under its share of the limit
		}
	}
	if policy == "" {
		items := make([]string, 0, enforced)
		for i := 0; i < enforced; i++ {
			items = append(items, policyItem(b.rules[i].Name, b.reqs[i].Limit, b.rules[i].Algorithm))
		}
		policy = strings.Join(items, ", ")
	}
	res := b.res[top]
	l.writeHeaders(w.Header(), policy, b.rules[top], &b.reqs[top], &res, now, l.denied == nil && !res.Allowed)
	if !denied {
		return l.multiReleaser(r, b), true
	}
	violated := []string{b.rules[top].Name}
	for i := 0; i < enforced; i++ {
		if i != top && b.state[i] == decided && !b.res[i].Allowed {
			violated = append(violated, b.rules[i].Name)
		}
	}
	body := b.rules[top].problem
	if len(violated) > 1 {
		body = problemBody(violated)
	}
	l.deny(w, r, body, b.rules[top].Name, &res, violated)
	// Shadow rules counted this request on their own: give back the
	// Concurrency slots they hold, since no handler runs.
	for i := enforced; i < b.n; i++ {
		if b.rules[i].Algorithm == Concurrency && b.state[i] == decided && b.res[i].Allowed {
			l.release(context.WithoutCancel(r.Context()), r, b.rules[i], b.by[i], b.reqs[i], b.res[i])
		}
	}
	return noop, false
}

// takeGroup asks one store about several rules at once (all or nothing).
func (l *Limiter) takeGroup(ctx context.Context, s Store, reqs []Request, res []Result) error {
	ctx, cancel := l.budget(ctx)
	defer cancel()
	if len(reqs) == 1 {
		var err error
		res[0], err = s.Take(ctx, reqs[0])
		return err
	}
	return s.TakeAll(ctx, reqs, res)
}

// compensate returns what enforced rules consumed before the request was
// denied (by another store's rule) or failed closed, so that a denial
// consumes nothing. Rules decided in the same store call as the denial were
// never consumed: TakeAll is all-or-nothing.
func (l *Limiter) compensate(r *http.Request, b *batch, enforced int) {
	for i := 0; i < enforced; i++ {
		if b.state[i] != decided || !b.res[i].Allowed || b.reqs[i].Cost == 0 {
			continue
		}
		if l.storeCallDenied(b, i, enforced) {
			continue
		}
		l.release(context.WithoutCancel(r.Context()), r, b.rules[i], b.by[i], b.reqs[i], b.res[i])
		b.state[i] = consumed
	}
}

// storeCallDenied reports whether request i was decided in the same store
// call as a denied one: that call was all-or-nothing, so i consumed nothing.
func (l *Limiter) storeCallDenied(b *batch, i, enforced int) bool {
	if b.call[i] < 0 {
		return false
	}
	for j := 0; j < enforced; j++ {
		if b.call[j] == b.call[i] && b.state[j] == decided && !b.res[j].Allowed {
			return true
		}
	}
	return false
}

// multiReleaser returns the release of every Concurrency slot taken.
func (l *Limiter) multiReleaser(r *http.Request, b *batch) func() {
	var held []int
	for i := 0; i < b.n; i++ {
		if b.rules[i].Algorithm == Concurrency && b.state[i] == decided && b.res[i].Allowed {
			held = append(held, i)
		}
	}
	if len(held) == 0 {
		return noop
	}
	rules := make([]*rule, len(held))
	stores := make([]Store, len(held))
	reqs := make([]Request, len(held))
	for j, i := range held {
		rules[j], stores[j], reqs[j] = b.rules[i], b.by[i], b.reqs[i]
		reqs[j].Slot = b.res[i].Slot
	}
	ctx := context.WithoutCancel(r.Context())
	return func() {
		for j := range reqs {
			l.release(ctx, r, rules[j], stores[j], reqs[j], Result{Slot: reqs[j].Slot})
		}
	}
}

func (l *Limiter) putBatch(b *batch) {
	clear(b.reqs[:b.n]) // drop key strings and stores
	clear(b.by[:b.n])
	clear(b.greqs[:])
	b.n = 0
	l.batches.Put(b)
}

// moreRestrictive reports whether a should be reported over b: a denial
// over an admission, the longer wait among denials, the fewer remaining
// units (then the later reset) among admissions.
func moreRestrictive(a, b *Result) bool {
	switch {
	case a.Allowed != b.Allowed:
		return !a.Allowed
	case !a.Allowed:
		return a.RetryAfter > b.RetryAfter
	case a.Remaining != b.Remaining:
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}

func mostRestrictive(res []Result) int {
	top := 0
	for i := range res {
		if moreRestrictive(&res[i], &res[top]) {
			top = i
		}
	}
	return top
}

// takeAll is TakeAll across rules that may live in different stores, with
// compensation: used by the programmatic AllowN.
func takeAll(ctx context.Context, rules []*rule, reqs []Request, results []Result) error {
	done := make([]bool, len(reqs))
	var taken []int
	for g := range reqs {
		if done[g] {
			continue
		}
		var idx []int
		for i := g; i < len(reqs); i++ {
			if !done[i] && rules[i].storeID == rules[g].storeID {
				idx = append(idx, i)
				done[i] = true
			}
		}
		greqs := make([]Request, len(idx))
		gres := make([]Result, len(idx))
		for j, i := range idx {
			greqs[j] = reqs[i]
		}
		if err := rules[g].Store.TakeAll(ctx, greqs, gres); err != nil {
			undo(ctx, rules, reqs, taken)
			return fmt.Errorf("%w: rule %q: %w", ErrStoreUnavailable, rules[g].Name, err)
		}
		denied := false
		for j, i := range idx {
			results[i] = gres[j]
			denied = denied || !gres[j].Allowed
		}
		if denied {
			undo(ctx, rules, reqs, taken)
			return nil
		}
		taken = append(taken, idx...)
	}
	return nil
}

func undo(ctx context.Context, rules []*rule, reqs []Request, taken []int) {
	for _, i := range taken {
		rules[i].Store.Return(context.WithoutCancel(ctx), reqs[i])
	}
}
