package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// ruleVerdict is one rule's part of a decision: its store request and what
// became of it. Both request paths (one rule, several rules) and Allow are
// built on it.
type ruleVerdict struct {
	ru  *rule
	req stores.Request
	res Result
	// by is the fallback store that decided when the rule's failed (nil
	// when the rule's own store decided: see store), and call the index of
	// the store call that decided it: the requests of one call were
	// all-or-nothing; -1 before the call, or for a fallback.
	by    Store
	call  int
	state ruleState
	// waiting: the request holds a waiting place of the rule's pacer
	// (beside state, so that the two share a word).
	waiting bool
	lat     time.Duration // store latency, when observed
	err     error         // why no store decided (failedOpen, failedClosed, misconfigured)
}

// ruleState is what became of one rule's request.
type ruleState uint8

const (
	pending       ruleState = iota // not sent (a cheaper rule already denied)
	decided                        // res holds the store's (or the fallback's) decision
	consumed                       // decided and allowed, then given back by compensation
	failedOpen                     // the store failed and the rule lets the request pass
	failedClosed                   // the store failed and the rule stops the request
	misconfigured                  // the store rejected the request as invalid
)

// answered reports whether a store's decision stands for the rule.
func (rv *ruleVerdict) answered() bool { return rv.state == decided || rv.state == consumed }

// store is the store that decided: the rule's, or a fallback's. (by is
// set only for a fallback: one pointer store less on the request path.)
func (rv *ruleVerdict) store() Store {
	if rv.by != nil {
		return rv.by
	}
	return rv.ru.Store
}

// holds reports whether the rule holds Concurrency slots until the request ends.
func (rv *ruleVerdict) holds() bool {
	return rv.state == decided && rv.res.Allowed && rv.ru.Algorithm == Concurrency && rv.req.Cost > 0
}

// decision is the state of one decision in progress, beside its rules'
// verdicts (passed apart, so that an array of one on the caller's stack
// stays there; a pooled batch holds them with several rules).
type decision struct {
	ctx      context.Context
	r        *http.Request // nil for Allow and AllowN
	enforced int           // how many of the rules' verdicts are enforced (they come first)
	now      time.Time
	scratch  *groupScratch // for store calls of several requests; nil with one rule
}

// add appends ru's request to rvs within its capacity, unlike append, so
// that a caller's array of one stays on its stack.
func add(rvs []ruleVerdict, ru *rule, req stores.Request) []ruleVerdict {
	n := len(rvs)
	rvs = rvs[:n+1]
	rvs[n] = ruleVerdict{ru: ru, req: req, call: -1}
	return rvs
}

// groupScratch holds the contiguous slices one TakeAll call needs.
type groupScratch struct {
	reqs [maxRules]stores.Request
	res  [maxRules]Result
}

// batch holds a decision's rules when there are several. Batches are
// pooled: the multi-rule path allocates only what it must keep.
type batch struct {
	rvs     [maxRules]ruleVerdict
	scratch groupScratch
}

func (l *Limiter) getBatch() *batch { return l.batches.Get().(*batch) }

func (l *Limiter) putBatch(b *batch) {
	n := 0
	for n < len(b.rvs) && b.rvs[n].ru != nil {
		n++
	}
	clear(b.rvs[:n]) // drop keys, stores and errors
	clear(b.scratch.reqs[:n])
	l.batches.Put(b)
}

// budget bounds a store call by the limiter's time budget, if it has one.
func (l *Limiter) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, noop
	}
	return context.WithTimeout(ctx, l.timeout)
}

// compensate gives back what enforced rules consumed before the request
// was denied (by another store's rule) or stopped, so that a denial
// consumes nothing. Requests decided in the same store call as a denial
// were never consumed: TakeAll is all-or-nothing.
func (l *Limiter) compensate(d *decision, rvs []ruleVerdict) {
	for i := range rvs[:d.enforced] {
		rv := &rvs[i]
		if rv.state != decided || !rv.res.Allowed || rv.req.Cost == 0 || callDenied(rvs[:d.enforced], rv.call) {
			continue
		}
		l.release(context.WithoutCancel(d.ctx), d.r, rv.ru, rv.store(), rv.req, rv.res.Slot)
		rv.state = consumed
	}
}

// callDenied reports whether store call call denied one of its requests.
func callDenied(rvs []ruleVerdict, call int) bool {
	if call < 0 {
		return false
	}
	for i := range rvs {
		rv := &rvs[i]
		if rv.call == call && rv.state == decided && !rv.res.Allowed {
			return true
		}
	}
	return false
}

// release gives back to store, the store that took them, the units req
// took: for Concurrency exactly the slots slot names, so that a release
// arriving after those slots expired frees no other request's.
func (l *Limiter) release(ctx context.Context, r *http.Request, ru *rule, store Store, req stores.Request, slot uint64) {
	ctx, cancel := l.budget(ctx)
	defer cancel()
	req.Slot = slot
	if err := store.Return(ctx, req); err != nil {
		l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError,
			Err: fmt.Errorf("%w: rule %q: releasing: %w", ErrStoreUnavailable, ru.Name, err), Request: r})
	}
}

// releaseShadow gives back the Concurrency slots shadow rules took for a
// request that was stopped: no handler runs.
func (l *Limiter) releaseShadow(d *decision, rvs []ruleVerdict) {
	for i := d.enforced; i < len(rvs); i++ {
		if rv := &rvs[i]; rv.holds() {
			l.release(context.WithoutCancel(d.ctx), d.r, rv.ru, rv.store(), rv.req, rv.res.Slot)
		}
	}
}

// held is what an admitted request holds until it has been served: the
// Concurrency slots it took, its adaptive slots and its settled rules'
// admissions. It exists only when there is something to give back.
type held struct {
	l        *Limiter
	ctx      context.Context
	r        *http.Request
	slots    []heldSlot
	adaptive adaptiveDone        // its held is empty without adaptive rules
	w        http.ResponseWriter // given to Verdict.Write: asked for the status
	// settlements are the settled rules' admissions; the carriage's state
	// is what Settle reaches once the request is carried
	// (Verdict.Context), which outlives h: see settleState.
	settlements []settlement
	carriage
	// slot1 and settle1 hold the first slot and settlement: with one rule
	// holding something, as nearly always, no slice is allocated.
	slot1   [1]heldSlot
	settle1 [1]settlement
}

// keepContext keeps, for the calls that give back what rv's store took
// after the response, the request's context without its cancellation
// (values a store wrapper may read, never the client's departure). The
// in-process store reads no context: for it, none is kept, and its
// allocation is saved.
func (h *held) keepContext(d *decision, rv *ruleVerdict) {
	if _, inProcess := rv.store().(*memory.Store); h.ctx == nil && !inProcess {
		h.ctx = context.WithoutCancel(d.ctx)
	}
}

// context is the context of the calls that give back what h holds.
func (h *held) context() context.Context {
	if h.ctx == nil {
		return context.Background()
	}
	return h.ctx
}

type heldSlot struct {
	ru     *rule
	store  Store
	req    stores.Request
	slot   uint64
	direct *fastRule // the direct path's rule that took the slot (admitHolding), which releases it; req holds only its key
}

// hold returns what the admitted request of d holds, or nil.
func (l *Limiter) hold(d *decision, rvs []ruleVerdict, ad *adaptiveDone) *held {
	var h *held
	if ad != nil && ad.n > 0 {
		h = &held{l: l, r: d.r, adaptive: *ad}
		ad.n, ad.more = 0, nil // now h's to release
	}
	for i := range rvs {
		if rv := &rvs[i]; rv.holds() {
			if h == nil {
				h = l.newHeld(d.r)
			}
			h.keepContext(d, rv)
			if h.slots == nil {
				h.slots = h.slot1[:0]
			}
			h.slots = append(h.slots, heldSlot{ru: rv.ru, store: rv.store(), req: rv.req, slot: rv.res.Slot})
		}
		if rv := &rvs[i]; rv.ru.Settled && rv.state == decided && rv.res.Allowed && rv.req.Cost > 0 {
			if h == nil {
				h = l.newHeld(d.r)
			}
			h.keepContext(d, rv)
			if h.settlements == nil {
				h.settlements = h.settle1[:0]
			}
			h.settlements = append(h.settlements, settlement{rv.ru, rv.store(), rv.req, rv.res.Slot})
		}
	}
	return h
}

// newHeld returns an empty held of r, recycled when one is free.
func (l *Limiter) newHeld(r *http.Request) *held {
	h, _ := l.helds.Get().(*held)
	if h == nil {
		h = new(held)
	}
	h.l, h.r = l, r
	return h
}

// recycle makes h, done with, free for another request. Only the
// middleware's own path calls it (Handler, ServeRoute), which alone knows
// that nothing else refers to h: a Verdict or a done function handed to
// the caller (Check, Admit) may be called again, so those are never
// recycled, nor are adaptive slots. A settling handler's context refers to
// h's settleState, never to h: Settle after the response reaches only the
// state, which is not recycled.
func (l *Limiter) recycle(h *held) {
	if l.adaptive != nil || h.adaptive.n > 0 {
		return
	}
	*h = held{}
	l.helds.Put(h)
}

// done releases everything, once; status is the response's (0 if unknown),
// for adaptive rules' classifiers.
func (h *held) done(status int) {
	if !h.once.CompareAndSwap(false, true) {
		return
	}
	h.settleAll()
	for _, s := range h.slots {
		if s.direct != nil {
			s.direct.release(s.req.Key, s.slot)
			continue
		}
		h.l.release(h.context(), h.r, s.ru, s.store, s.req, s.slot)
	}
	h.adaptive.release(true, status)
}

// doneRecorded is done with the status recorded by the ResponseWriter given
// to Write, when it records one.
func (h *held) doneRecorded() { h.doneServed(true) }

// doneServed is doneRecorded for a handler that returned (served) or
// panicked: a panic counts as a 500 whatever the handler wrote before it,
// so that an adaptive rule never samples a request that failed fast as a
// fast success.
func (h *held) doneServed(served bool) {
	if !served {
		h.done(http.StatusInternalServerError)
		return
	}
	status := 0
	if s, ok := h.w.(interface{ Status() int }); ok {
		status = s.Status()
	}
	h.done(status)
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
