package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limiter applies one or more rules to requests, as net/http middleware
// (Handler), for framework adapters (Admit), or from inside a handler (Allow,
// AllowN, Return).
//
// A Limiter is safe for concurrent use and immutable once built. Most callers
// want New (one rule) or NewRules (several), which return the middleware
// directly; build a Limiter with NewLimiter or NewRulesLimiter to also check
// limits programmatically.
type Limiter struct {
	rules        []*rule // enforced rules first, local stores first; shadow rules last
	enforced     int     // how many of rules are enforced
	store        Store
	clock        Clock
	headers      HeaderStyle
	policyHeader string // every enforced rule's policy item, when all are static
	carveOuts    carveOuts
	skippers     []func(*http.Request) bool
	denied       http.Handler
	onError      func(http.ResponseWriter, *http.Request, error)
	observers    []Observer
	timeout      time.Duration
	needNow      bool // quotas or legacy headers read the clock
	batches      sync.Pool
	adaptive     []*rule // adaptive rules (adaptive_rule.go), checked first
}

// New returns middleware that limits requests to limit per key. For example,
// 100 requests per minute per client IP:
//
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP())
//	http.ListenAndServe(":8080", mw(mux))
//
// Invalid static configuration (a zero limit, a nil key, a bad option)
// panics with a "ratelimit: ..." message, like http.HandleFunc does.
func New(limit Limit, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	return NewLimiter(limit, key, opts...).Handler
}

// NewLimiter returns a Limiter with a single rule; see New.
func NewLimiter(limit Limit, key KeyFunc, opts ...Option) *Limiter {
	if err := limit.Validate(); err != nil {
		panic(err.Error())
	}
	c := buildConfig(opts)
	name := c.name
	if !slices.Contains(c.ruleOpts, "WithName") {
		name = "" // compileRule derives one from the limit and the key
	}
	r := Rule{
		Name: name, Limit: limit, Key: key, KeyKind: c.keyKind, Algorithm: c.algorithm,
		Cost: c.costFunc, Shadow: c.shadow, OnStoreError: c.failure,
	}
	if c.onError != nil && c.failure == FailOpen {
		r.OnStoreError = FailClosed(http.StatusServiceUnavailable)
	}
	return newLimiter([]Rule{r}, c, c.cost)
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
// the 429 body names every rule that denied. Options that describe a single
// rule (WithName, WithAlgorithm, WithCost, ...) panic here: set the Rule's
// fields instead.
func NewRules(rules []Rule, opts ...Option) func(http.Handler) http.Handler {
	return NewRulesLimiter(rules, opts...).Handler
}

// NewRulesLimiter returns a Limiter with several rules; see NewRules.
func NewRulesLimiter(rules []Rule, opts ...Option) *Limiter {
	c := buildConfig(opts)
	if len(c.ruleOpts) > 0 {
		panic(fmt.Sprintf("ratelimit: NewRules: %s describes a single rule; set the Rule's fields instead", c.ruleOpts[0]))
	}
	return newLimiter(rules, c, 1)
}

// MaxRules is the most rules one Limiter takes.
const MaxRules = 16

func buildConfig(opts []Option) config {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if c.clock == nil {
		c.clock = SystemClock
	}
	if c.store == nil {
		c.store = newDefaultStore(c.clock)
	}
	return c
}

func newLimiter(rules []Rule, c config, fixedCost int) *Limiter {
	if len(rules) == 0 || len(rules) > MaxRules {
		panic(fmt.Sprintf("ratelimit: a Limiter takes 1 to %d rules, got %d", MaxRules, len(rules)))
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
		ru := compileRule(rules[i], c, fixedCost)
		ru.storeID, stores = storeID(stores, ru.Store)
		if names[ru.Name] {
			panic(fmt.Sprintf("ratelimit: two rules are named %q; names key the state and must differ", ru.Name))
		}
		names[ru.Name] = true
		if ru.adaptive != nil {
			l.adaptive = append(l.adaptive, ru)
			continue
		}
		l.needNow = l.needNow || !ru.Quota.IsZero() || ru.QuotaFunc != nil
		l.rules = append(l.rules, ru)
	}
	// Enforced before shadow; among enforced, local stores first (cheap-first).
	slices.SortStableFunc(l.rules, func(a, b *rule) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)))
	})
	var items []string
	allStatic := true
	for _, ru := range l.rules {
		if !ru.Shadow {
			l.enforced++
			items = append(items, ru.policyItem)
			allStatic = allStatic && ru.static
		}
	}
	if allStatic {
		l.policyHeader = strings.Join(items, ", ")
	}
	l.carveOuts = newCarveOuts(c.carveOuts)
	l.batches.New = func() any { return new(batch) }
	l.prepareFast()
	return l
}

// storeID returns s's index in seen, appending it if new. Stores are told
// apart with == where their type allows it; a store of a type that cannot
// be compared (a struct holding a func or a map) is always its own.
func storeID(seen []Store, s Store) (int, []Store) {
	if reflect.TypeOf(s).Comparable() {
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

// Handler returns next wrapped by the limiter.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Handler(nil)")
	}
	mux, _ := next.(*http.ServeMux) // asked which pattern serves a carve-out
	return &handler{l: l, next: next, mux: mux}
}

type handler struct {
	l    *Limiter
	next http.Handler
	mux  *http.ServeMux
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.l.serve(w, r, h.next, h.mux)
}

// serve is the middleware's request path: admit, then next, then done.
// mux is next when next is a *http.ServeMux (asked about carve-outs).
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler, mux *http.ServeMux) {
	w = l.recordStatus(w)
	done, ok := l.admit(w, r, routing{mux: mux})
	if !ok {
		return
	}
	defer done()
	next.ServeHTTP(w, r)
}

// Admit applies the limiter to r. It sets the rate-limit fields on w and,
// when the request may proceed, returns ok and a done function that the
// caller must call once the request has been served (it releases
// Concurrency slots; for other rules it does nothing). Otherwise it has
// written the response (429, the denied handler's, a key error or a
// fail-closed store error) and the caller must stop. Framework adapters
// build on Admit, or on AdmitRoute when their router has matched a route;
// with net/http, use Handler.
func (l *Limiter) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	return l.admit(w, r, routing{})
}

func (l *Limiter) admit(w http.ResponseWriter, r *http.Request, rt routing) (done func(), ok bool) {
	if l.skip(r, rt) {
		l.observe(Event{Outcome: OutcomeSkipped, Request: r})
		return noop, true
	}
	if l.adaptive != nil {
		return l.admitAdaptive(w, r)
	}
	return l.admitRules(w, r)
}

func (l *Limiter) admitRules(w http.ResponseWriter, r *http.Request) (func(), bool) {
	if len(l.rules) == 1 {
		return l.admitOne(w, r, l.rules[0])
	}
	return l.admitMany(w, r)
}

func noop() {}

// admitOne is the path of a single rule: no batch, no allocation beyond the
// response fields.
func (l *Limiter) admitOne(w http.ResponseWriter, r *http.Request, ru *rule) (func(), bool) {
	if ru.fast != nil {
		if ok, handled := ru.fast.admit(w, r, ru); handled {
			return noop, ok
		}
	}
	var now time.Time
	if l.needNow {
		now = l.clock.Now()
	}
	req, use, err := ru.request(r, now)
	switch {
	case use == exempt:
		return noop, true
	case use == keyFailed && ru.Shadow:
		l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
		return noop, true // a shadow rule never denies
	case use == keyFailed:
		return l.keyFailed(w, r, ru, err)
	case use == overCapacity:
		return l.costExceeded(w, r, ru, &req)
	}
	start := l.startTimer()
	res, err := l.take(r, ru, &req)
	lat := l.since(start)
	store := ru.Store // the store that decided: a fallback's if the rule's failed
	if err != nil {
		var proceed bool
		if res, store, proceed, err = l.storeFailed(w, r, ru, &req, err, lat); err != nil {
			return noop, proceed
		}
	}
	if ru.Shadow {
		l.observeResult(r, ru, res, OutcomeShadowDenied, lat)
		return l.releaser(r, ru, store, req, res), true
	}
	l.observeResult(r, ru, res, OutcomeDenied, lat)
	policy := l.policyHeader
	if policy == "" || req.Limit != ru.Limit { // dynamic, or decided by a fallback's share
		policy = policyItem(ru.Name, req.Limit, ru.Algorithm)
	}
	l.writeHeaders(w.Header(), policy, ru, &req, &res, now, l.denied == nil && !res.Allowed)
	if res.Allowed {
		return l.releaser(r, ru, store, req, res), true
	}
	l.deny(w, r, ru.problem, ru.Name, &res, nil)
	return noop, false
}

// take asks the rule's store, within the time budget.
func (l *Limiter) take(r *http.Request, ru *rule, req *Request) (Result, error) {
	ctx, cancel := l.budget(r.Context())
	defer cancel()
	return ru.Store.Take(ctx, *req)
}

// budget bounds a store call by the limiter's time budget, if it has one.
func (l *Limiter) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, noop
	}
	return context.WithTimeout(ctx, l.timeout)
}

// storeFailed applies ru's FailurePolicy after err. When the fallback
// decided, it returns its result and the fallback store with a nil error,
// and rewrites *req to the request the fallback saw (its share of the
// limit), so that releases and undos go to the store that took the units.
// Otherwise it returns a non-nil error and whether the request may proceed
// (the response is written when it may not). A shadow rule never writes.
func (l *Limiter) storeFailed(w http.ResponseWriter, r *http.Request, ru *rule, req *Request, err error, lat time.Duration) (Result, Store, bool, error) {
	err = fmt.Errorf("%w: rule %q: %w", ErrStoreUnavailable, ru.Name, err)
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrInvalidLimit) {
		// A LimitFunc or Cost produced something no store can enforce: a
		// bug in the configuration, never a reason to let traffic through
		// (nor, for a shadow rule, to stop it).
		l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError, Err: err, Latency: lat, Request: r})
		if ru.Shadow {
			return Result{}, nil, true, err
		}
		writeProblem(w, http.StatusInternalServerError, "about:blank", "The rate limit is misconfigured.")
		return Result{}, nil, false, err
	}
	p := ru.OnStoreError
	if p.mode == failFallback {
		local := *req
		local.Limit = p.share(req.Limit)
		local.Cost = min(local.Cost, local.Limit.Capacity())
		res, ferr := p.fallback.Take(r.Context(), local)
		if ferr == nil {
			l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeFallback, Result: res, Err: err, Latency: lat, Request: r})
			*req = local
			return res, p.fallback, true, nil
		}
		err = fmt.Errorf("%w (fallback: %w)", err, ferr)
	}
	l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError, Err: err, Latency: lat, Request: r})
	if p.mode != failClosed || ru.Shadow {
		return Result{}, nil, true, err
	}
	l.failClosed(w, r, p.status, err)
	return Result{}, nil, false, err
}

func (l *Limiter) failClosed(w http.ResponseWriter, r *http.Request, status int, err error) {
	if l.onError != nil {
		l.onError(w, r, err)
		return
	}
	h := w.Header()
	h[hdrRetryAfter] = []string{"1"}
	writeProblem(w, status, failClosedType(status), "The rate limiter is unavailable; retry shortly.")
}

// failClosedType is the problem type of a fail-closed response (FailClosed
// takes 429 or 503): the one draft-ietf-httpapi-ratelimit-headers registers
// for its status, quota-exceeded for 429 and temporary-reduced-capacity for
// 503.
func failClosedType(status int) string {
	if status == http.StatusTooManyRequests {
		return ProblemType
	}
	return "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
}

func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	h := w.Header()
	h[hdrContentType] = []string{"application/problem+json"}
	h[hdrCacheControl] = []string{"no-store"}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d,"detail":%q}`+"\n", typ, http.StatusText(status), status, detail)
}

// deny writes a denial: the denied handler's, or 429 with body.
func (l *Limiter) deny(w http.ResponseWriter, r *http.Request, body []byte, name string, res *Result, violated []string) {
	if l.denied != nil {
		if violated == nil {
			violated = []string{name}
		}
		d := &Decision{Rule: name, Result: *res, Violated: violated}
		l.denied.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
		return
	}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(body)
}

// releaser returns what Admit's caller runs when the request is done: the
// release of the Concurrency slots that were taken, or nothing.
func (l *Limiter) releaser(r *http.Request, ru *rule, store Store, req Request, res Result) func() {
	if ru.Algorithm != Concurrency || !res.Allowed {
		return noop
	}
	ctx := context.WithoutCancel(r.Context())
	return func() { l.release(ctx, r, ru, store, req, res) }
}

// release gives back to store, the store that took them, the units that
// req took with result res: for Concurrency, exactly the slots res.Slot
// names, so that a release arriving after those slots expired frees no
// other request's.
func (l *Limiter) release(ctx context.Context, r *http.Request, ru *rule, store Store, req Request, res Result) {
	ctx, cancel := l.budget(ctx)
	defer cancel()
	req.Slot = res.Slot
	if err := store.Return(ctx, req); err != nil {
		l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeStoreError, Err: fmt.Errorf("%w: releasing a slot: %w", ErrStoreUnavailable, err), Request: r})
	}
}

func (l *Limiter) keyFailed(w http.ResponseWriter, r *http.Request, ru *rule, err error) (func(), bool) {
	l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
	h := w.Header()
	h[hdrContentType] = []string{"application/problem+json"}
	h[hdrCacheControl] = []string{"no-store"}
	w.WriteHeader(ru.keyErrStatus)
	body := ru.keyProblem
	if b := keyProblemDetail(ru.keyErrStatus, err); b != nil {
		body = b
	}
	w.Write(body)
	return noop, false
}

func (l *Limiter) observe(e Event) {
	for _, o := range l.observers {
		o.Observe(e)
	}
}

// observeResult reports a decision; deniedAs is the outcome of a denial
// (Denied, or ShadowDenied for a shadow rule).
func (l *Limiter) observeResult(r *http.Request, ru *rule, res Result, deniedAs Outcome, lat time.Duration) {
	if len(l.observers) == 0 {
		return
	}
	o := OutcomeAllowed
	if !res.Allowed {
		o = deniedAs
	}
	l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: o, Result: res, Latency: lat, Request: r})
}

// startTimer and since measure store latency for observers, in real time,
// and only when someone observes: reading the clock is not free.
func (l *Limiter) startTimer() time.Time {
	if len(l.observers) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func (l *Limiter) since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return max(time.Since(start), 1) // an observed call never reports zero
}

func keyProblemBody(status int) []byte {
	return []byte(`{"type":"about:blank","title":` + strconv.Quote(http.StatusText(status)) +
		`,"status":` + strconv.Itoa(status) + `,"detail":"The request carries no usable rate-limit key."}` + "\n")
}

// Decision is the limiter's verdict on a request, available to a denied
// handler through DecisionFrom.
type Decision struct {
	Rule     string   // the most restrictive rule that denied
	Result   Result   // its result
	Violated []string // every rule that denied, most restrictive first
}

type decisionKey struct{}

// DecisionFrom returns the decision the limiter attached to r before calling
// the handler set by WithDeniedHandler.
func DecisionFrom(r *http.Request) (*Decision, bool) {
	d, ok := r.Context().Value(decisionKey{}).(*Decision)
	return d, ok
}

// Allow reports whether one event for key fits now under every rule of the
// limiter, and consumes it if so. The error is non-nil when a store could
// not decide. With several rules, key is used for each (in its own rule's
// namespace) and the result is the most restrictive.
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n events for key fit now, and consumes them if so.
// n must be between 0 (a query that consumes nothing) and the capacity: n
// above a rule's capacity could never be admitted, so AllowN returns an
// error wrapping ErrInvalidRequest and consumes nothing.
// Rules with a LimitFunc, Quota or QuotaFunc need a request and are skipped.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	reqs, rules := l.keyRequests(key, n)
	if len(reqs) == 0 {
		return Result{}, fmt.Errorf("%w: every enforced rule of this limiter needs a request (LimitFunc, Quota or QuotaFunc); use the middleware", ErrInvalidRequest)
	}
	if len(reqs) == 1 {
		return rules[0].Store.Take(ctx, reqs[0])
	}
	results := make([]Result, len(reqs))
	if err := takeAll(ctx, rules, reqs, results); err != nil {
		return Result{}, err
	}
	return results[mostRestrictive(results)], nil
}

// Return gives back n events for key under every rule, for example after a
// login attempt that turned out to be valid.
func (l *Limiter) Return(ctx context.Context, key string, n int) error {
	reqs, rules := l.keyRequests(key, n)
	if len(reqs) == 0 {
		return fmt.Errorf("%w: every enforced rule of this limiter needs a request", ErrInvalidRequest)
	}
	var errs []error
	for i := range reqs {
		errs = append(errs, rules[i].Store.Return(ctx, reqs[i]))
	}
	return errors.Join(errs...)
}

func (l *Limiter) keyRequests(key string, n int) ([]Request, []*rule) {
	var reqs []Request
	var rules []*rule
	for _, ru := range l.rules[:l.enforced] {
		if ru.static {
			reqs = append(reqs, Request{Rule: ru.Name, Key: compactKey(key), Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: n})
			rules = append(rules, ru)
		}
	}
	return reqs, rules
}
