package ratelimit

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Reloadable holds the current Limiter and lets the application replace it
// while requests are in flight, to change rules without a restart (see the
// config module, which builds Limiters from a rules file).
//
// Each request is decided by exactly one Limiter: the one current when the
// request arrived. Store replaces it with a single atomic pointer store, so
// requests never see a mix of two rule sets; the done function returned by
// Admit releases through the Limiter that took the slots, so removing a
// Concurrency rule while requests hold its slots loses nothing.
//
// State lives in the stores, keyed by rule name. Build every Limiter a
// Reloadable holds with the same Store (WithStore, and the same Rule.Store
// values): a rule whose name, algorithm and key are unchanged then keeps its
// counters across a reload, and a changed limit applies to the existing
// state from the first request after Store returns. Never build new stores
// on reload: a fresh store starts every bucket full.
//
// A Reloadable is safe for concurrent use. Its zero value holds no Limiter
// (use NewReloadable, or Store one before use): Handler panics on it, and
// until a Limiter is stored its other methods act as the zero Limiter's
// (Admit answers 500, Peek and Reset return an error), never admitting a
// request unlimited.
type Reloadable struct {
	cur atomic.Pointer[Limiter]
}

// NewReloadable returns a Reloadable holding l. It panics if l is nil.
func NewReloadable(l *Limiter) *Reloadable {
	if l == nil {
		panic("ratelimit: NewReloadable(nil)")
	}
	h := new(Reloadable)
	h.cur.Store(l)
	return h
}

// Load returns the current Limiter, or a zero Limiter when none was stored.
// Use it for Allow, Peek or Reset, so that a sequence of calls sees one rule
// set.
func (h *Reloadable) Load() *Limiter {
	if l := h.cur.Load(); l != nil {
		return l
	}
	return new(Limiter) // unusable: it refuses, see Limiter
}

// Store makes l the current Limiter and returns the previous one. Requests
// that arrive after Store returns are decided by l. It panics if l is nil.
//
// An adaptive rule keeps its state in its Limiter, not in a store: Store
// hands each adaptive rule of l the state of the current Limiter's rule of
// the same name and settings (bounds, window, tolerance, key limit, clock),
// so that its limit, what it learned and the requests in flight carry
// over; its Classify, Critical and OnWindow functions stay those of the
// rule it continues. An adaptive rule that is new, or whose settings
// changed, starts afresh.
func (h *Reloadable) Store(l *Limiter) (old *Limiter) {
	if l == nil {
		panic("ratelimit: Reloadable.Store(nil)")
	}
	if cur := h.cur.Load(); cur != nil {
		l.continueAdaptive(cur)
	}
	return h.cur.Swap(l)
}

// continueAdaptive gives l's adaptive rules the state of old's rules of the
// same name and settings.
func (l *Limiter) continueAdaptive(old *Limiter) {
	if old == l {
		return
	}
	for _, ru := range l.adaptive {
		for _, o := range old.adaptive {
			if prev := o.adaptive.Load(); o.Name == ru.Name && prev.sameSettings(ru.adaptive.Load()) {
				ru.adaptive.Store(prev)
			}
		}
	}
}

// Handler returns next wrapped by whichever Limiter is current when each
// request arrives. It panics if h holds no Limiter yet, as Limiter.Handler
// does on the zero Limiter (a Limiter once stored is never removed).
func (h *Reloadable) Handler(next http.Handler) http.Handler {
	if h.cur.Load() == nil {
		panic("ratelimit: Reloadable.Handler on a Reloadable that holds no Limiter: use NewReloadable")
	}
	return &reloadHandler{h: h, wrapped: wrap(next)}
}

type reloadHandler struct {
	h *Reloadable
	wrapped
}

func (rh *reloadHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rh.h.cur.Load().serve(w, r, rh.next, rh.mux)
}

// Admit is Limiter.Admit on the current Limiter; done releases through that
// same Limiter even if another has been stored since.
func (h *Reloadable) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	return h.Load().admit(w, r, routing{})
}

// Peek is Limiter.Peek on the current Limiter.
func (h *Reloadable) Peek(ctx context.Context, rule, key string) (Result, error) {
	return h.Load().Peek(ctx, rule, key)
}

// Reset is Limiter.Reset on the current Limiter.
func (h *Reloadable) Reset(ctx context.Context, rule, key string) error {
	return h.Load().Reset(ctx, rule, key)
}

// AdmitRoute is Limiter.AdmitRoute on the current Limiter.
func (h *Reloadable) AdmitRoute(w http.ResponseWriter, r *http.Request, route string) (done func(), ok bool) {
	return h.Load().AdmitRoute(w, r, route)
}
