package ratelimit

import (
	"context"
	"fmt"
	"github.com/sluicehq/ratelimit/stores"
	"net/http"
)

// Settle reports the actual cost of the request whose context is ctx, for
// the rules that settle (Rule.Settled) of every limiter
// serving it: LLM tokens, rows scanned, bytes sent, known only once the
// handler has done its work. Call it from the handler, before it returns;
// the last call wins. When the request has been served, each such rule
// charges actual minus its estimate (the request's cost when admitted) or
// gives the difference back:
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
// A request that never calls Settle keeps its estimate, and so does one
// admitted while its rule's store failed open (nothing was taken to
// settle against). Settle reports whether ctx belongs to a request with a
// rule still to settle: false outside a settling limiter and once the
// request has been served (a late call changes nothing).
//
// actual below one counts as one, as a cost does at admission: an admitted
// request is never free, so a rule bounds the requests it admits whatever
// they settle. For an LLM call that failed before producing a token, settle
// 0: the estimate is given back but for one unit, and a client whose calls
// all fail at once is still held to the limit's number of calls.
func Settle(ctx context.Context, actual int) bool {
	h, _ := ctx.Value(settleKey{}).(*held)
	actual = min(max(actual, 1), stores.MaxCount)
	ok := false
	for ; h != nil; h = h.outer {
		h.actual.Store(int64(actual) + 1) // 0 means not settled
		ok = ok || !h.once.Load()
	}
	return ok
}

type settleKey struct{}

// Context returns ctx carrying what Settle needs to reach the verdict's
// settled rules: adapters built on Check pass it to the handler (as the
// request's context) when the limiter settles costs. It returns ctx itself
// otherwise.
func (v Verdict) Context(ctx context.Context) context.Context {
	if v.held == nil || !v.l.settled {
		return ctx
	}
	outer, _ := ctx.Value(settleKey{}).(*held)
	for h := outer; h != nil; h = h.outer {
		if h == v.held { // already carried (Context called twice)
			return ctx
		}
	}
	v.held.outer = outer
	if !v.held.carried.CompareAndSwap(false, true) {
		return context.WithValue(ctx, settleKey{}, v.held) // a context of its own for another parent
	}
	v.held.carrier = settleContext{Context: ctx, h: v.held}
	return &v.held.carrier
}

// settleContext is the context that carries a settling request's held to
// Settle: ctx with h as the value of settleKey{}. It lives inside h, so
// that carrying it costs no allocation of its own; a held that carries one
// is never recycled (see recycle), so the context stays what it is for as
// long as anything refers to it.
type settleContext struct {
	context.Context
	h *held
}

// Value returns the held for settleKey{}, and asks the parent otherwise.
func (c *settleContext) Value(key any) any {
	if _, ok := key.(settleKey); ok {
		return c.h
	}
	return c.Context.Value(key)
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
func (h *held) settleAll() {
	a := h.actual.Load()
	if a == 0 {
		return
	}
	actual := int(a - 1)
	for _, s := range h.settlements {
		delta := actual - s.req.Cost
		if delta == 0 {
			continue
		}
		req := s.req
		req.Slot, req.MaxDelay = s.slot, 0
		ctx, cancel := h.l.budget(h.context())
		var err error
		if delta > 0 {
			req.Cost, req.Force = delta, true
			_, err = s.store.Take(ctx, req)
		} else {
			req.Cost = -delta
			if s.ru.pacer == nil && s.ru.Algorithm == GCRA {
				// A rule that never reserves has no turns to keep: its
				// refund comes off the key's time. With the token, a store
				// would keep it as a hole whenever the key's time is past
				// its burst, as a debt from another settlement puts it,
				// and the refund would be lost.
				req.Slot = 0
			}
			err = s.store.Return(ctx, req)
		}
		cancel()
		if err != nil {
			h.l.observers.observe(Event{Rule: s.ru.Name, KeyKind: s.ru.KeyKind, Outcome: OutcomeStoreError,
				Err: fmt.Errorf("%w: rule %q: settling %d units: %w", ErrStoreUnavailable, s.ru.Name, delta, err), Request: h.r})
		}
	}
}

// settleRequest returns r with its context carrying h, for the handler's
// Settle, when the limiter settles costs.
func (l *Limiter) settleRequest(r *http.Request, h *held) *http.Request {
	if !l.settled || h == nil {
		return r
	}
	ctx := Verdict{l: l, held: h}.Context(r.Context())
	if h.room != nil && ctx == &h.carrier {
		// WithContext inlined: its copy stays on the stack, and the
		// request lives in the held's allocation.
		h.room.req = *r.WithContext(ctx)
		return &h.room.req
	}
	return r.WithContext(ctx)
}

// Settles reports whether a rule of the limiter settles costs
// (Rule.Settled). Adapters built on Admit, which cannot
// give the handler a new context, serve such a limiter with Check and
// Verdict.Context instead, and keep Admit's direct path for the others.
func (l *Limiter) Settles() bool { return l.settled }
