package config

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/ratelimit"
)

// Live holds the Set in force and replaces it while requests are in
// flight: ratelimit.Reloadable for a whole rules file. Each request is
// decided by the Set current when it arrives, and by no other, so a reload
// never mixes two rule sets in one request; the done function of Admit
// releases through the Limiter that took the slots.
//
// Build every Set a Live holds against the same Registry, so that their
// rules share the same stores and keep their counters across a swap.
//
// A Live is safe for concurrent use. Its zero value holds no Set; use
// NewLive.
type Live struct {
	cur atomic.Pointer[Set]
}

// NewLive returns a Live holding s. It panics if s is nil.
func NewLive(s *Set) *Live {
	if s == nil {
		panic("ratelimit: config.NewLive(nil)")
	}
	l := new(Live)
	l.cur.Store(s)
	return l
}

// Load returns the Set in force. Use it for several calls that must see
// one rule set.
func (l *Live) Load() *Set { return l.cur.Load() }

// Store makes s the Set in force and returns the previous one: requests
// that arrive after Store returns are decided by s. It panics if s is nil.
func (l *Live) Store(s *Set) (old *Set) {
	if s == nil {
		panic("ratelimit: config.Live.Store(nil)")
	}
	return l.cur.Swap(s)
}

// Peek is Set.Peek on the Set in force.
func (l *Live) Peek(ctx context.Context, rule, key string) (ratelimit.Result, error) {
	return l.cur.Load().Peek(ctx, rule, key)
}

// Reset is Set.Reset on the Set in force.
func (l *Live) Reset(ctx context.Context, rule, key string) error {
	return l.cur.Load().Reset(ctx, rule, key)
}

// Admit is Set.Admit on the Set in force; done releases through the
// Limiter that admitted the request, even after a swap.
func (l *Live) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	return l.cur.Load().Admit(w, r)
}

// Handler returns next wrapped by the Set in force when each request
// arrives (one atomic load per request).
func (l *Live) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Handler(nil)")
	}
	return &liveHandler{l: l, next: next}
}

// liveHandler keeps, for the Set in force, the handlers of its groups
// around next; the first request after a swap rebuilds them.
type liveHandler struct {
	l     *Live
	next  http.Handler
	bound atomic.Pointer[boundSet]
}

type boundSet struct {
	set *Set
	hs  []http.Handler
}

func (h *liveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.l.cur.Load()
	b := h.bound.Load()
	if b == nil || b.set != s {
		b = &boundSet{set: s, hs: s.handlers(h.next)}
		h.bound.Store(b) // a racing request may store its own copy: both are whole
	}
	s.serve(b.hs, h.next, w, r)
}
