package ratelimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/ratelimit/internal/fieldval"
	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// noDelay is the delay of a Concurrency rule's RateLimit value, which has
// no t: its slots come back when requests finish, not at a time.
const noDelay = -1

// directHeld is what a request admitted on the direct path of a rule that
// holds something (a Concurrency rule's slot, a settled rule's admission)
// holds until it has been served. On the middleware's own path (Handler,
// ServeRoute) it lives on the stack of the call that runs the handler
// (serveHolding): nothing of it is recycled, so nothing can be reused while
// the handler, a Settle call or a panic can still reach it.
type directHeld struct {
	f    *fastRule
	key  string
	slot uint64 // the admission's Result.Slot
	now  int64  // the admission's time
	// A settled rule's admission reaches its handler on sw (Handler) or,
	// when routed is set before the decision, on sr (ServeRoute); both
	// are nil for a Concurrency rule.
	sw     *settleWriter
	sr     *settledRequest
	routed bool
	// detached is set before the decision for an admission that outlives
	// the call (Admit): no writer carries it to a handler.
	detached bool
	// hold is a Concurrency admission's way back to its slot (see
	// memstore.Held): its release neither hashes the key nor, when the
	// key is hot, takes a lock.
	hold memstore.Held
}

// takeHolding is the direct path of a request that holds something once
// admitted, as admit is for a plain rate. It takes the decision, writes
// the fields or the 429 and, when the request is admitted, fills d; a
// settled rule's request, when carry is set, gets the settleWriter (or,
// with d.routed, the settledRequest) that its handler is given and its
// field values live in. It reports handled false, having taken and
// written nothing, when r needs the general path (see admit).
func (f *fastRule) takeHolding(w http.ResponseWriter, r *http.Request, ru *rule, d *directHeld, carry bool) (ok, handled bool) {
	key, err := ru.Key(r)
	if err != nil {
		return false, false
	}
	h := w.Header()
	if nested(h) {
		return false, false
	}
	now := f.now()
	key = compactKey(key)
	var res memstore.Result
	if f.slots {
		res = f.check.TakeHeld(key, now, &d.hold)
	} else {
		f.check.TakeInto(key, now, &res)
	}
	if !res.Allowed {
		if f.slots && res.Remaining > 0 {
			// not with a cost of 1; deny, on the benchmarked path, would give t
			f.setFields(h, res.Remaining, noDelay, now)
			h[hdrRetryAfter] = []string{strconv.FormatInt(max(1, fieldval.Seconds(time.Duration(res.RetryAfter))), 10)}
			h[hdrCacheControl] = []string{"no-store"}
			h[hdrContentType] = []string{"application/problem+json"}
		} else {
			f.deny(h, &res, now)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(f.problem)
		return false, true
	}
	d.f, d.key, d.slot, d.now = f, key, res.Slot, now
	switch {
	case f.slots:
		f.setFields(h, res.Remaining, noDelay, now)
	case carry && d.routed:
		d.sr = newSettledRequest(r)
		f.allowedIn(h, &res, &d.sr.vals, d.sr.buf[:0], now)
	case carry:
		d.sw = newSettleWriter(w)
		f.allowedIn(h, &res, &d.sw.vals, nil, now)
	default:
		f.allowed(h, &res, now)
	}
	return true, true
}

// admitHolding is takeHolding for a request admitted after adaptive rules
// (admitAfterAdaptive), whose holding joins its adaptive slots in one held:
// what the request holds under the direct rule is returned as a held.
func (f *fastRule) admitHolding(w http.ResponseWriter, r *http.Request, l *Limiter) (_ *held, ok, handled bool) {
	var d directHeld
	ru := l.rules[0]
	if ok, handled := f.takeHolding(w, r, ru, &d, false); !ok {
		return nil, false, handled
	}
	return l.heldOf(r, f, ru, &d), true, true
}

// heldOf is a held record of what d holds under ru, f's rule: its
// Concurrency slot, or its settled admission.
func (l *Limiter) heldOf(r *http.Request, f *fastRule, ru *rule, d *directHeld) *held {
	hd := l.newHeld(r)
	if f.slots {
		hd.slots = hd.slot1[:1]
		hd.slots[0] = heldSlot{ru: ru, direct: f, slot: d.slot}
		hd.slots[0].req.Key = d.key
		return hd
	}
	hd.settlements = hd.settle1[:1]
	hd.settlements[0] = d.settlement(ru)
	return hd
}

// settlement is the settled rule ru's admission that d holds.
func (d *directHeld) settlement(ru *rule) settlement {
	return settlement{ru: ru, store: ru.Store, slot: d.slot,
		req: stores.Request{Rule: ru.Name, Key: d.key, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1}}
}

// release gives back the slot that admitHolding took for key.
func (f *fastRule) release(key string, slot uint64) {
	f.check.Release(key, slot, f.now())
}

// directDone is what Check and Admit hand back for a request admitted on
// the direct path of a rule that holds something: its directHeld, given
// back or settled by the first Done. It is the request's own and never
// reused, since the caller may keep the Verdict or call Done again; about
// a fifth of a held, which the general path needs.
type directDone struct {
	carriage
	l *Limiter
	d directHeld
}

// done gives back what dd holds, once.
func (dd *directDone) done() {
	if dd.once.CompareAndSwap(false, true) {
		dd.d.finish(dd.l, dd.settle.Load())
	}
}

// serveHolding is the middleware's request path (serve) for a limiter
// whose direct rule holds something. A request admitted on the direct path
// holds it on this call's stack while next runs, and gives it back when
// next returns or panics; one skipped, or decided on the general path, is
// served as serve serves it.
func (l *Limiter) serveHolding(w http.ResponseWriter, r *http.Request, next http.Handler, rt routing) {
	var d directHeld
	h, ok := l.admitHeld(w, r, rt, &d)
	if !ok {
		return
	}
	if d.f == nil {
		if h == nil {
			next.ServeHTTP(w, r)
			return
		}
		l.serveWith(w, r, h, next)
		return
	}
	defer d.done(l)
	if d.sw != nil {
		w = d.sw
	}
	next.ServeHTTP(w, r)
}

// serveHoldingRoute is serveHolding for ServeRoute's middleware path.
func (l *Limiter) serveHoldingRoute(w http.ResponseWriter, r *http.Request, rt routing, next func(*http.Request) error) (served bool, err error) {
	d := directHeld{routed: true}
	h, ok := l.admitHeld(w, r, rt, &d)
	if !ok {
		return false, nil
	}
	if d.f == nil {
		return true, l.serveHeld(r, h, next)
	}
	defer d.done(l)
	if d.sr != nil {
		r = &d.sr.req
	}
	return true, next(r)
}

// done gives back what d holds, once its request has been served: the
// slot, or the settlement of what the handler reported with Settle. Its
// state is marked served first, so that a later Settle reports false.
func (d *directHeld) done(l *Limiter) {
	var s *settleState
	switch {
	case d.sw != nil:
		s = &d.sw.settleState
	case d.sr != nil:
		s = &d.sr.ctx.settleState
	}
	d.finish(l, s)
}

// finish is done with the settle state s that carried d's settled
// admission to its handler: nil for a Concurrency slot, and for a settled
// admission that nothing carried, which settles nothing.
func (d *directHeld) finish(l *Limiter, s *settleState) {
	if d.f.slots {
		// At the admission's time, which saves a clock read: the slot is
		// found by its token, and entries that expired since the
		// admission are dropped by the key's next take, as by this
		// release at a later time.
		d.f.check.ReleaseHeld(&d.hold, d.slot, d.now)
		return
	}
	if s == nil {
		return
	}
	if a := s.serve(); a != 0 {
		// Straight to the engine the admission was taken from, as
		// settleOne would through the store, less the store's checks of
		// a request the direct path built.
		delta := a - 1 - 1 // the actual cost less the estimate, 1
		d.f.check.Settle(d.key, l.rules[0].settleSlot(d.slot, delta), int64(delta), d.f.now())
	}
}

// allowedIn is allowed with the response's field slices kept in vals, part
// of the allocation that the request has anyway; now is the time of the
// check. The RateLimit value is shared as setFields shares it (the rule's
// cache, or a hot key's run), and a miss is cached as setFields caches
// one. Any other miss is formatted into buf, an empty slice of that same
// allocation, or, with buf nil, into a string of its own.
func (f *fastRule) allowedIn(h http.Header, res *memstore.Result, vals *[2]string, buf []byte, now int64) {
	next := res.Next // a window's: see nextAfter
	if f.gcra {
		next = fieldval.GCRANext(res.ResetAfter, f.unit, f.units, res.Remaining)
	}
	remaining, t := max(0, res.Remaining), fieldval.Seconds(time.Duration(next))
	if v := f.values.get(remaining, t); v != nil {
		vals[1] = v.s
	} else if s, ok := f.runValue(remaining, t); ok {
		vals[1] = s
	} else if admitValue(now) {
		vals[1] = f.buildValue(remaining, t, true)[1]
	} else if buf != nil {
		vals[1] = f.format(buf, remaining, t)
	} else {
		var b [64]byte
		vals[1] = string(f.appendValue(b[:0], remaining, t))
	}
	vals[0] = f.policy
	h[hdrPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}
