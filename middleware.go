package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"time"
)

// Limiter applies a limit to requests, as net/http middleware (Handler) or
// from inside a handler (Allow, AllowN, Return).
//
// A Limiter is safe for concurrent use and immutable once built. Most callers
// want New, which returns the middleware directly; build a Limiter with
// NewLimiter to also check limits programmatically.
type Limiter struct {
	store        Store
	clock        Clock
	rule         rule
	headers      HeaderStyle
	policyHeader string
	carveOuts    map[string]struct{}
	skippers     []func(*http.Request) bool
	denied       http.Handler
	onError      func(http.ResponseWriter, *http.Request, error)
	onKeyError   KeyErrorPolicy
	keyErrStatus int
	problem      []byte // the 429 body
	keyProblem   []byte // the key-error body
}

// rule is a compiled limit: what to count and how to report it.
type rule struct {
	name         string
	quotedName   string // the name as a Structured Fields string
	noKeyRule    string // the Rule of the shared bucket for keyless requests
	limit        Limit
	key          KeyFunc
	algorithm    Algorithm
	cost         int
	costFunc     func(*http.Request) int
	capacityText string
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

// NewLimiter returns a Limiter; see New.
func NewLimiter(limit Limit, key KeyFunc, opts ...Option) *Limiter {
	if err := limit.Validate(); err != nil {
		panic(err.Error())
	}
	if key == nil {
		panic("ratelimit: New needs a KeyFunc, such as ByIP()")
	}
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
	probe := Request{Limit: limit, Algorithm: c.algorithm, Cost: c.cost}
	if err := probe.Validate(); err != nil {
		panic(err.Error())
	}
	l := &Limiter{
		store:        c.store,
		clock:        c.clock,
		headers:      c.headers,
		skippers:     c.skippers,
		denied:       c.denied,
		onError:      c.onError,
		onKeyError:   c.onKeyError,
		keyErrStatus: c.keyErrStatus,
		rule: rule{
			name:         c.name,
			quotedName:   strconv.Quote(c.name),
			noKeyRule:    c.name + "#nokey",
			limit:        limit,
			key:          key,
			algorithm:    c.algorithm,
			cost:         c.cost,
			costFunc:     c.costFunc,
			capacityText: strconv.Itoa(limit.Capacity()),
		},
	}
	l.policyHeader = policyItem(c.name, limit)
	l.problem = problemBody([]string{c.name})
	l.keyProblem = keyProblemBody(c.keyErrStatus)
	if len(c.carveOuts) > 0 {
		l.carveOuts = make(map[string]struct{}, len(c.carveOuts))
		for _, p := range c.carveOuts {
			l.carveOuts[p] = struct{}{}
		}
	}
	return l
}

// Handler returns next wrapped by the limiter.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Handler(nil)")
	}
	return &handler{l: l, next: next}
}

type handler struct {
	l    *Limiter
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.l.Decide(w, r) {
		h.next.ServeHTTP(w, r)
	}
}

// Decide applies the limiter to r. It sets the rate-limit fields on w and
// returns true when the request may proceed to the next handler; otherwise
// it has written the response (429, the denied handler's, a key error's or
// the error handler's) and the caller must stop. Framework adapters build on
// it; with net/http, use Handler.
func (l *Limiter) Decide(w http.ResponseWriter, r *http.Request) bool {
	if l.skip(r) {
		return true
	}
	ru := &l.rule
	req := Request{Rule: ru.name, Limit: ru.limit, Algorithm: ru.algorithm, Cost: ru.cost}
	key, err := ru.key(r)
	switch {
	case err != nil && l.onKeyError == RejectKeyError:
		l.rejectKey(w)
		return false
	case err != nil:
		req.Rule = ru.noKeyRule
	default:
		req.Key = compactKey(key)
	}
	if ru.costFunc != nil {
		req.Cost = min(max(ru.costFunc(r), 1), ru.limit.Capacity())
	}
	res, err := l.store.Take(r.Context(), req)
	if err != nil {
		if l.onError != nil {
			l.onError(w, r, fmt.Errorf("ratelimit: store: %w", err))
			return false
		}
		return true
	}
	var now time.Time
	if l.headers&HeadersLegacy != 0 {
		now = l.clock.Now()
	}
	l.writeHeaders(w.Header(), ru, &res, now, l.denied == nil && !res.Allowed)
	if res.Allowed {
		return true
	}
	if l.denied != nil {
		d := &Decision{Rule: ru.name, Result: res}
		l.denied.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
		return false
	}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(l.problem)
	return false
}

// skip reports whether r is carved out or skipped by a predicate.
func (l *Limiter) skip(r *http.Request) bool {
	if l.carveOuts != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && l.carvedOut(r.URL.Path) {
		return true
	}
	for _, s := range l.skippers {
		if s(r) {
			return true
		}
	}
	return false
}

// carvedOut matches p exactly, or after path.Clean when p is not clean
// ("/healthz/", "//healthz"). A path with dot segments ("/api/../healthz")
// is never carved out: a router that does not clean paths would serve it
// from another route, and the carve-out would become a bypass.
func (l *Limiter) carvedOut(p string) bool {
	if _, ok := l.carveOuts[p]; ok {
		return true
	}
	if len(p) > 256 || !needsClean(p) || hasDotSegment(p) {
		return false
	}
	_, ok := l.carveOuts[path.Clean(p)]
	return ok
}

// needsClean reports whether path.Clean could change p other than by
// resolving dot segments: a doubled or trailing slash.
func needsClean(p string) bool {
	if len(p) > 1 && p[len(p)-1] == '/' {
		return true
	}
	for i := 1; i < len(p); i++ {
		if p[i] == '/' && p[i-1] == '/' {
			return true
		}
	}
	return false
}

func hasDotSegment(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '.' && (i == 0 || p[i-1] == '/') {
			if i+1 == len(p) || p[i+1] == '/' || p[i+1] == '.' && (i+2 == len(p) || p[i+2] == '/') {
				return true
			}
		}
	}
	return false
}

// maxKeyLen is the longest key sent to a store as is. Longer keys (a 1 MB
// header used as a key) are replaced by their SHA-256, so that a client
// cannot make the store keep or send large keys.
const maxKeyLen = 256

func compactKey(k string) string {
	if len(k) <= maxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (l *Limiter) rejectKey(w http.ResponseWriter) {
	h := w.Header()
	h[hdrContentType] = []string{"application/problem+json"}
	h[hdrCacheControl] = []string{"no-store"}
	w.WriteHeader(l.keyErrStatus)
	w.Write(l.keyProblem)
}

func keyProblemBody(status int) []byte {
	return []byte(`{"type":"about:blank","title":` + strconv.Quote(http.StatusText(status)) +
		`,"status":` + strconv.Itoa(status) + `,"detail":"The request carries no usable rate-limit key."}` + "\n")
}

// Decision is the limiter's verdict on a request, available to a denied
// handler through DecisionFrom.
type Decision struct {
	Rule   string // the name of the rule that decided
	Result Result
}

type decisionKey struct{}

// DecisionFrom returns the decision the limiter attached to r before calling
// the handler set by WithDeniedHandler.
func DecisionFrom(r *http.Request) (*Decision, bool) {
	d, ok := r.Context().Value(decisionKey{}).(*Decision)
	return d, ok
}

// Allow reports whether one event for key fits now, and consumes it if so.
// The error is non-nil when the store could not decide.
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n events for key fit now, and consumes them if so.
// n must be between 0 (a query that consumes nothing) and the capacity.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	return l.store.Take(ctx, l.request(key, n))
}

// Return gives back n events for key, for example after a login attempt
// that turned out to be valid.
func (l *Limiter) Return(ctx context.Context, key string, n int) error {
	return l.store.Return(ctx, l.request(key, n))
}

func (l *Limiter) request(key string, n int) Request {
	return Request{Rule: l.rule.name, Key: compactKey(key), Limit: l.rule.limit, Algorithm: l.rule.algorithm, Cost: n}
}
