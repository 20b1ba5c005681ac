package ratelimit

import (
	"cmp"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Limiter applies one or more rules to requests, as net/http middleware
// (Handler), for framework adapters (Admit), or from inside a handler (Allow,
// AllowN, Return).
//
// A Limiter is safe for concurrent use and immutable once built. Most callers
// want New (one rule) or NewRules (several), which return the middleware
// directly; build a Limiter with NewLimiter or NewRulesLimiter to also check
// limits programmatically.
//
// The zero Limiter has no rules and is not usable: it never lets a request
// or an event through unlimited. Handler panics on it, as New does on a bad
// configuration; Check, CheckRoute and Admit answer 500 (a misconfigured
// limiter); Allow, AllowN, AllowAtMost and Return return an error wrapping
// ErrInvalidRequest and allow nothing.
type Limiter struct {
	rules        []*rule // enforced rules first, local stores first; shadow rules last
	enforced     int     // how many of rules are enforced
	store        Store
	clock        Clock
	headers      HeaderStyle
	policyHeader string // every enforced rule's policy item, when all are static
	carveOuts    carveOuts
	skippers     []func(*http.Request) bool
	denied       func(http.ResponseWriter, *http.Request, *Verdict)
	onError      func(http.ResponseWriter, *http.Request, error)
	observers    observers
	timeout      time.Duration
	needNow      bool // quotas or legacy headers read the clock
	batches      sync.Pool
	adaptive     []*rule // adaptive rules (adaptive_rule.go), checked first
	slots        bool    // some rule is a Concurrency limit: admitted requests may hold slots
	paced        bool    // some rule is paced: admitted requests may wait
	settled      bool    // some rule settles costs after the response
	policies     atomic.Pointer[policyCache]
	helds        sync.Pool  // of *held: see recycle
	stack        *fastStack // the direct path of stacked rules, or nil
	_            [32]byte   // whole cache lines: see TestHotStateFillsWholeCacheLines
}

// New returns middleware that limits requests to limit per key. For example,
// 100 requests per minute per client IP:
//
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP())
//	http.ListenAndServe(":8080", mw(mux))
//
// Invalid static configuration (a zero limit, a nil key, a bad option)
// panics with a "ratelimit: ..." message, like http.HandleFunc does. The
// rule is a GCRA limit that fails open; the Rule fields of NewRules set
// everything else about a rule (algorithm, cost, failure policy, pacing,
// settlement), for one rule as for several.
func New(limit Limit, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	return NewLimiter(limit, key, opts...).Handler
}

// NewLimiter returns a Limiter with a single rule; see New. The rule is a
// GCRA limit that fails open, named from its key kind and limit unless
// WithName names it: for another algorithm, a cost, a failure policy, pacing
// or settlement, give NewRulesLimiter a Rule with those fields.
func NewLimiter(limit Limit, key KeyFunc, opts ...Option) *Limiter {
	if err := limit.Validate(); err != nil {
		panic(err.Error())
	}
	c := buildConfig(opts)
	name := c.name
	if !slices.Contains(c.ruleOpts, "WithName") {
		name = "" // compileRule derives one from the limit and the key
	}
	return newLimiter([]Rule{{Name: name, Limit: limit, Key: key}}, c)
}

// NewRules returns middleware that applies every rule to each request: a
// request is admitted only if every enforced rule allows it, and a denial by
// one rule consumes nothing from the others. For example, a global cap, a
// per-IP limit and a daily quota per API key:
//
//	mw := ratelimit.NewRules([]ratelimit.Rule{
//		{Name: "global", Limit: ratelimit.PerSecond(1000), Key: ratelimit.Global()},
//		{Name: "ip", Limit: ratelimit.PerMinute(100), Key: ratelimit.ByIP()},
//		{Name: "daily", Quota: ratelimit.Daily(10_000, nil), Key: ratelimit.ByAPIKey("X-API-Key")},
//	})
//
// The response fields list every policy and report the most restrictive;
// the 429 body names every rule that denied. A Limiter takes 1 to 16
// rules; NewRules panics on more. WithName, which names the
// single rule of New, panics here: set Rule.Name instead.
func NewRules(rules []Rule, opts ...Option) func(http.Handler) http.Handler {
	return NewRulesLimiter(rules, opts...).Handler
}

// NewRulesLimiter returns a Limiter with several rules; see NewRules.
func NewRulesLimiter(rules []Rule, opts ...Option) *Limiter {
	c := buildConfig(opts)
	if len(c.ruleOpts) > 0 {
		panic(fmt.Sprintf("ratelimit: NewRules: %s describes a single rule; set the Rule's fields instead", c.ruleOpts[0]))
	}
	return newLimiter(rules, c)
}

// maxRules is the most rules one Limiter takes: NewRules panics past it.
// The config module keeps its own copy and tests that they agree.
const maxRules = 16

func buildConfig(opts []Option) config {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if c.clock == nil {
		c.clock = stores.SystemClock()
	}
	if c.store == nil {
		c.store = memory.New(memory.WithClock(c.clock))
	}
	return c
}

func newLimiter(rules []Rule, c config) *Limiter {
	if len(rules) == 0 || len(rules) > maxRules {
		panic(fmt.Sprintf("ratelimit: a Limiter takes 1 to %d rules, got %d", maxRules, len(rules)))
	}
	l := &Limiter{
		store:     c.store,
		clock:     c.clock,
		headers:   c.headers,
		skippers:  c.skippers,
		denied:    c.denied,
		onError:   c.onError,
		observers: c.observers,
		timeout:   c.timeout,
		needNow:   c.headers&HeadersLegacy != 0,
	}
	names := map[string]bool{}
	var stores []Store
	for i := range rules {
		ru := compileRule(rules[i], c)
		ru.OnStoreError.validate(ru.Name)
		ru.storeID, stores = storeID(stores, ru.Store)
		if names[ru.Name] {
			panic(fmt.Sprintf("ratelimit: two rules are named %q; names key the state and must differ", ru.Name))
		}
		names[ru.Name] = true
		if ru.adaptive.Load() != nil {
			l.adaptive = append(l.adaptive, ru)
			continue
		}
		l.needNow = l.needNow || !ru.Quota.IsZero() || ru.QuotaFunc != nil
		l.slots = l.slots || ru.Algorithm == Concurrency
		l.paced = l.paced || ru.pacer != nil
		l.settled = l.settled || ru.Settled
		l.rules = append(l.rules, ru)
	}
	if l.paced && len(l.adaptive) > 0 {
		panic("ratelimit: a Limiter with adaptive rules cannot pace: the wait would count as the server's latency; put the paced rule in a limiter around this one")
	}
	if l.paced && countEnforced(rules) > 1 {
		panic("ratelimit: a paced rule must be its Limiter's only enforced rule: the others would count a request when it is decided, not when it is served; put them in a limiter inside the paced one")
	}
	// Enforced before shadow; among enforced, local stores first (cheap-first).
	slices.SortStableFunc(l.rules, func(a, b *rule) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)))
	})
	var items []string
	allStatic, failsClosed := true, false
	for _, ru := range l.rules {
		if !ru.Shadow {
			l.enforced++
			items = append(items, ru.policyItem)
			allStatic = allStatic && ru.static
			failsClosed = failsClosed || ru.OnStoreError.mode() == failClosed
		}
	}
	if c.onError != nil && !failsClosed {
		panic("ratelimit: WithErrorHandler answers store errors of rules that fail closed, and no rule does: set Rule.OnStoreError.Status on one")
	}
	if allStatic {
		l.policyHeader = strings.Join(items, ", ")
	}
	l.carveOuts = newCarveOuts(c.carveOuts)
	l.batches.New = func() any { return new(batch) }
	l.prepareFast()
	l.prepareStack()
	return l
}

// storeID returns s's index in seen, appending it if new. Stores are told
// apart with == where their value allows it; a store that cannot be
// compared (a struct holding a func or a map, or a store that does) is
// always its own.
func storeID(seen []Store, s Store) (int, []Store) {
	// The value's comparability, not its type's: a comparable struct may
	// hold a Store whose dynamic type is not, and == would panic on it.
	if reflect.ValueOf(s).Comparable() {
		for i, x := range seen {
			if reflect.TypeOf(x) == reflect.TypeOf(s) && x == s {
				return i, seen
			}
		}
	}
	return len(seen), append(seen, s)
}

func rank(r *rule) int {
	switch {
	case r.Shadow:
		return 2
	case r.local:
		return 0
	}
	return 1
}

// Handler returns next wrapped by the limiter. It panics if l is the zero
// Limiter (build one with NewLimiter or NewRulesLimiter) or next is nil.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if l.zero() {
		panic(errZeroLimiter.Error())
	}
	return &handler{l: l, wrapped: wrap(next)}
}

// wrapped is the handler a limiter serves after its decision.
type wrapped struct {
	next http.Handler
	mux  *http.ServeMux // next, if a ServeMux: asked which pattern serves a carve-out
}

// wrap returns next as a wrapped. It panics if next is nil.
func wrap(next http.Handler) wrapped {
	if next == nil {
		panic("ratelimit: Handler(nil)")
	}
	mux, _ := next.(*http.ServeMux)
	return wrapped{next: next, mux: mux}
}

type handler struct {
	l *Limiter
	wrapped
	_ [32]byte // a whole cache line: see TestHotStateFillsWholeCacheLines
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.l.serve(w, r, h.next, h.mux)
}

// serve is the middleware's request path: admit, then next, then done.
// mux is next when next is a *http.ServeMux (asked about carve-outs).
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler, mux *http.ServeMux) {
	if l.adaptive != nil { // the adaptive step first, then the rest of this path
		l.serveAdapting(w, r, next, routing{mux: mux})
		return
	}
	if f := l.direct(); f != nil && f.holds {
		l.serveHolding(w, r, next, routing{mux: mux})
		return
	}
	h, ok := l.admitHeld(w, r, routing{mux: mux}, nil)
	if !ok {
		return
	}
	if h == nil {
		next.ServeHTTP(w, r)
		return
	}
	l.serveWith(w, r, h, next)
}

// serveWith runs next for a request admitted by the middleware holding h,
// and gives back what it holds when next returns or panics. Under a
// limiter that settles costs, the handler is given the writer that
// carries h's state to Settle.
func (l *Limiter) serveWith(w http.ResponseWriter, r *http.Request, h *held, next http.Handler) {
	served := false
	defer func() { h.doneServed(served); l.recycle(h) }() // open-coded: no allocation
	next.ServeHTTP(l.settleWriter(w, h), r)
	served = true
}

// Admit is Check and Write: it applies the limiter to r, sets the
// rate-limit fields on w and, when the request may proceed, returns ok and
// a done function that the caller must call once the request has been
// served (Verdict.Done). Otherwise it has written the response and the
// caller must stop. Admit cannot pass the handler a context or a writer
// for Settle: for a limiter that Settles, use Check and Verdict.Context.
func (l *Limiter) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	return l.admit(w, r, routing{})
}

// AdmitRoute is CheckRoute and Write, as Admit is Check and Write.
func (l *Limiter) AdmitRoute(w http.ResponseWriter, r *http.Request, route string) (done func(), ok bool) {
	return l.admit(w, r, routing{route: route, routed: true})
}

func (l *Limiter) admit(w http.ResponseWriter, r *http.Request, rt routing) (done func(), ok bool) {
	d := directHeld{detached: true}
	h, ok := l.admitHeld(w, r, rt, &d)
	switch {
	case d.f != nil && d.f.slots:
		return (&directDone{l: l, d: d}).done, ok
	case h == nil:
		// Also a settled rule's direct admission: nothing carried it to
		// Settle, so done would settle nothing (see directHeld.finish).
		return noop, ok
	}
	return h.doneRecorded, ok
}

// admitHeld is admit returning what the request holds (nil when nothing is
// to be released) rather than a function, which would allocate. With d
// not nil, a request admitted on the direct path of a rule that holds
// something holds it in *d instead (d.f set), for the caller to serve with
// serveHolding or, d being detached, to give back with a directDone.
func (l *Limiter) admitHeld(w http.ResponseWriter, r *http.Request, rt routing, d *directHeld) (*held, bool) {
	if l.skip(r, rt) {
		l.observers.observe(Event{Outcome: OutcomeSkipped, Request: r})
		return nil, true
	}
	if l.adaptive != nil { // then l.direct() is nil: d stays empty
		return l.admitAdapting(w, r)
	}
	return l.admitRules(w, r, d)
}

// admitRules is admitHeld's decision under the rules other than adaptive:
// on their direct path when it was prepared (prepareFast, prepareStack),
// else on the general one. d is admitHeld's.
func (l *Limiter) admitRules(w http.ResponseWriter, r *http.Request, d *directHeld) (*held, bool) {
	if f := l.rulesDirect(); f != nil {
		if !f.holds {
			if ok, handled := f.admit(w, r, l.rules[0]); handled {
				return nil, ok
			}
		} else if d != nil {
			if ok, handled := f.takeHolding(w, r, l.rules[0], d, l.settled && !d.detached); handled {
				return nil, ok
			}
		} else if hd, ok, handled := f.admitHolding(w, r, l); handled {
			return hd, ok // after adaptive rules: see admitAfterAdaptive
		}
	} else if s := l.stack; s != nil {
		if ok, handled := s.admit(w, r); handled {
			return nil, ok
		}
	}
	var v Verdict
	l.decideAfter(r, nil, &v, nil) // the adaptive rules, if any, have admitted r
	v.write(w)
	if !v.Allowed() {
		return nil, false
	}
	return v.held, true
}

func noop() {}

// CarvesOut reports whether path is one of the limiter's carve-out paths
// (DefaultCarveOuts or WithCarveOuts). Adapters use it to look up the
// route of a request only when it could be carved out.
func (l *Limiter) CarvesOut(path string) bool {
	return l.carveOuts.has(path)
}

// skip reports whether r is carved out or skipped by a predicate.
func (l *Limiter) skip(r *http.Request, rt routing) bool {
	if l.carveOuts.match(r, rt) {
		return true
	}
	for _, s := range l.skippers {
		if s(r) {
			return true
		}
	}
	return false
}

// countEnforced counts the rules that are neither shadow nor adaptive.
func countEnforced(rules []Rule) int {
	n := 0
	for _, r := range rules {
		if !r.Shadow && r.Adaptive == nil {
			n++
		}
	}
	return n
}
