package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/ratelimit/stores"
)

// Settle reports the actual cost of the request that ctx and w serve, for
// the rules that settle (Rule.Settled) of every limiter serving it: LLM
// tokens, rows scanned, bytes sent, known only once the handler has done
// its work. Call it from the handler, with the request's context and the
// ResponseWriter it was given (Settle(r.Context(), w, n)), before it
// returns; the last call wins. When the request has been served, each such
// rule charges actual minus its estimate (the request's cost when
// admitted) or gives the difference back:
//
//   - against what the admission consumed: for GCRA, the key's bucket; for
//     the window algorithms, the window the request counted in, never a
//     later one (a settlement for a window that no longer counts changes
//     nothing);
//   - whether or not it fits: a charge above what is left leaves the key in
//     debt (GCRA) or over its count (windows), so that its next requests
//     wait or are denied; a refund never raises the state above full;
//   - on a context detached from the client's, within the limiter's time
//     budget: a client that disconnects mid-handler is still charged.
//
// Settle finds the limiters through both ctx and w. Limiter.Handler passes
// the request on unchanged and gives the handler a writer that carries the
// admission: Settle reaches it, and the limiters around it, through w and
// the writers w wraps (their Unwrap methods, as http.ResponseController
// follows them). ServeRoute, and the gin, echo and chi adapters built on
// it, carry the admission in the request's context instead
// (Verdict.Context), as the grpc adapter does in the call's: a handler
// with a context and no writer passes w nil. Code that has only the
// request's context cannot reach Handler's admission: pass w along.
//
// A request that never calls Settle keeps its estimate, and so does one
// admitted while its rule's store failed open (nothing was taken to
// settle against). Settle reports whether it reached a rule still to
// settle: false outside a settling limiter and once the request has been
// served (a late call changes nothing, and reaches no other request).
//
// actual below one counts as one, as a cost does at admission: an admitted
// request is never free, so a rule bounds the requests it admits whatever
// they settle. For an LLM call that failed before producing a token, settle
// 0: the estimate is given back but for one unit, and a client whose calls
// all fail at once is still held to the limit's number of calls.
func Settle(ctx context.Context, w http.ResponseWriter, actual int) bool {
	actual = min(max(actual, 1), stores.MaxCount)
	ok := false
	if w != nil {
		ok = settleWriters(w, actual)
	}
	if ctx != nil {
		ok = settleIn(ctx, actual) || ok
	}
	return ok
}

// settleIn reports actual to every state that ctx carries, and whether
// one of them had a rule still to settle.
func settleIn(ctx context.Context, actual int) bool {
	s, _ := ctx.Value(settleKey{}).(*settleState)
	ok := false
	for ; s != nil; s = s.outer {
		ok = s.report(actual) || ok
	}
	return ok
}

type settleKey struct{}

// settleState is what Settle reaches of an admitted request: the actual
// cost it reported and whether the request has been served, in one word,
// so that the settlement takes the cost and closes the state at once.
// The contexts and writers that carry it keep it for as long as anything
// refers to them, so it is never recycled and never part of what is: the
// held that gives back what the request took may serve another request as
// soon as this one has been served, while a goroutine the handler left
// behind can still call Settle.
type settleState struct {
	word  atomic.Int64 // the cost Settle reported, plus one (0 until it does), with servedBit once served
	outer *settleState // in a context, the state of a limiter around this one, which Settle reaches too
}

// servedBit marks a state whose request has been served: above every cost
// (stores.MaxCount), plus one.
const servedBit = 1 << 62

// report records actual as the request's cost, unless the request has been
// served, and reports whether it did.
func (s *settleState) report(actual int) bool {
	for {
		old := s.word.Load()
		if old&servedBit != 0 {
			return false
		}
		if s.word.CompareAndSwap(old, int64(actual)+1) {
			return true
		}
	}
}

// serve marks the request served and returns the cost Settle reported, or
// 0 if it did not: later reports change nothing.
func (s *settleState) serve() int {
	return int(s.word.Or(servedBit) &^ servedBit)
}

// settleContext is the context that carries a settling request's state to
// Settle: its parent, with the state it holds as the value of settleKey{}.
type settleContext struct {
	context.Context
	settleState
}

// Value returns the state for settleKey{}, and asks the parent otherwise.
func (c *settleContext) Value(key any) any {
	if _, ok := key.(settleKey); ok {
		return &c.settleState
	}
	return c.Context.Value(key)
}

// carry makes c the context over parent that carries c's state, which
// Settle reaches before the state that parent carries, if any.
func (c *settleContext) carry(parent context.Context) {
	c.outer, _ = parent.Value(settleKey{}).(*settleState)
	c.Context = parent
}

// settleAlias is a context over another parent that carries the state of
// a settleContext: Verdict.Context called for a second parent.
type settleAlias struct {
	context.Context
	s *settleState
}

// Value returns the state for settleKey{}, and asks the parent otherwise.
func (c *settleAlias) Value(key any) any {
	if _, ok := key.(settleKey); ok {
		return c.s
	}
	return c.Context.Value(key)
}

// settledRequest is what a request admitted through ServeRoute by a
// limiter that settles costs is given beyond its admission, in one
// allocation: the request its handler is given, whose context carries the state to Settle, and on the
// direct path its response's field values. Nothing in it is recycled: the
// handler may keep the request and its context.
type settledRequest struct {
	ctx  settleContext
	req  http.Request
	vals [2]string // RateLimit-Policy, RateLimit
	buf  [48]byte  // the RateLimit value, when it fits
}

// newSettledRequest returns the settledRequest of r: r with a context of
// its own, r's carrying the new state to Settle.
func newSettledRequest(r *http.Request) *settledRequest {
	sr := new(settledRequest)
	sr.ctx.carry(r.Context())
	sr.req = *r.WithContext(&sr.ctx) // WithContext inlined: its copy stays on the stack
	return sr
}

// Context returns ctx carrying what Settle needs to reach
// the verdict's settled rules: adapters built on Check pass it to the
// handler (as the request's context) when the limiter settles costs. It
// returns ctx itself otherwise.
func (v Verdict) Context(ctx context.Context) context.Context {
	h := v.carried()
	if h == nil || !v.l.settled {
		return ctx
	}
	if s := h.settle.Load(); s != nil {
		for o, _ := ctx.Value(settleKey{}).(*settleState); o != nil; o = o.outer {
			if o == s { // already carried (Context called twice)
				return ctx
			}
		}
		return &settleAlias{Context: ctx, s: s} // a context of its own for another parent
	}
	c := new(settleContext)
	c.carry(ctx)
	if !h.adopt(&c.settleState) { // carried meanwhile, by another call
		return &settleAlias{Context: ctx, s: h.settle.Load()}
	}
	return c
}

// carried is the carriage of what v's request holds, or nil when it holds
// nothing.
func (v *Verdict) carried() *carriage {
	switch {
	case v.held != nil:
		return &v.held.carriage
	case v.direct != nil:
		return &v.direct.carriage
	}
	return nil
}

// carriage is what an admission that outlives its call keeps for Done and
// Verdict.Context: whether it is done, and the state that Settle reaches
// once a context carries the request. Its zero value is an admission
// neither done nor carried.
type carriage struct {
	once   atomic.Bool                 // set by the first Done
	settle atomic.Pointer[settleState] // nil until carried
}

// adopt makes s the state that Settle reaches for c, unless c has one
// already. A request served before it is carried is marked served: done
// reads the state after marking c done, adopt marks c's state after
// storing it, so that one of the two sees the other.
func (c *carriage) adopt(s *settleState) bool {
	if !c.settle.CompareAndSwap(nil, s) {
		return false
	}
	if c.once.Load() {
		s.serve()
	}
	return true
}

// settlement is a settled rule's admission: what Done settles against.
type settlement struct {
	ru    *rule
	store Store
	req   stores.Request // Cost is the estimate
	slot  uint64         // Result.Slot of the admission: its window
}

// settleAll charges or gives back, for every settled rule of h, the
// difference between the actual cost Settle reported and the estimate.
// h is done: its state, if it was carried, is marked served first, so
// that a later Settle reports false.
func (h *held) settleAll() {
	s := h.settle.Load()
	if s == nil {
		return // never carried: nothing was settled
	}
	a := s.serve()
	if a == 0 {
		return
	}
	for i := range h.settlements {
		h.l.settleOne(h.context(), h.r, &h.settlements[i], a-1)
	}
}

// settleOne charges or gives back the difference between actual and s's
// estimate, against what s's admission consumed, within the limiter's
// time budget from ctx; r is the request, for the event of a store error.
func (l *Limiter) settleOne(ctx context.Context, r *http.Request, s *settlement, actual int) {
	delta := actual - s.req.Cost
	if delta == 0 {
		return
	}
	req := s.req
	req.Slot, req.MaxDelay = s.ru.settleSlot(s.slot, delta), 0
	ctx, cancel := l.budget(ctx)
	defer cancel()
	var err error
	if delta > 0 {
		req.Cost, req.Force = delta, true
		_, err = s.store.Take(ctx, req)
	} else {
		req.Cost = -delta
		err = s.store.Return(ctx, req)
	}
	if err != nil {
		l.observers.observe(Event{Rule: s.ru.Name, KeyKind: s.ru.KeyKind, Outcome: OutcomeStoreError,
			Err: fmt.Errorf("%w: rule %q: settling %d units: %w", ErrStoreUnavailable, s.ru.Name, delta, err), Request: r})
	}
}

// settleSlot is the slot a settlement of delta units aims at, for an
// admission whose Result.Slot was slot.
func (ru *rule) settleSlot(slot uint64, delta int) uint64 {
	if delta < 0 && ru.pacer == nil && ru.Algorithm == GCRA {
		// A rule that never reserves has no turns to keep: its refund
		// comes off the key's time. With the token, a store would keep
		// it as a hole whenever the key's time is past its burst, as a
		// debt from another settlement puts it, and the refund would be
		// lost.
		return 0
	}
	return slot
}

// settleRequest returns r with its context carrying the state of c, an
// admission's carriage, for the handler's Settle, when the limiter settles
// costs: ServeRoute's way, whose handler is given a request and no writer.
// c is fresh from its admission (a held's, or Check's directDone in
// ServeRoute): never carried before.
func (l *Limiter) settleRequest(r *http.Request, c *carriage) *http.Request {
	if !l.settled {
		return r
	}
	sr := newSettledRequest(r)
	c.adopt(&sr.ctx.settleState)
	return &sr.req
}

// Settles reports whether a rule of the limiter settles costs
// (Rule.Settled). Adapters built on Admit, which cannot give the handler a
// new context or writer, serve such a limiter with Check and
// Verdict.Context instead, and keep Admit's direct path for the others.
func (l *Limiter) Settles() bool { return l.settled }
