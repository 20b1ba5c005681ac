package ratelimit

import (
	"bufio"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// adaptiveSet is a compiled adaptive rule: a controller per key, up to
// MaxKeys, then one shared by the rest. Lookups read an immutable map
// through an atomic pointer: no lock and no allocation on the request path.
type adaptiveSet struct {
	cfg      Adaptive
	name     string
	clock    Clock
	system   bool                       // clock is SystemClock: read the monotonic clock alone
	epoch    time.Time                  // the time every controller of the rule counts from
	denial   atomic.Pointer[denyFields] // the fields of a rejection at the last limit rejected
	keys     atomic.Pointer[map[string]*AdaptiveLimiter]
	mu       sync.Mutex // serialises additions
	overflow *AdaptiveLimiter
	shared   atomic.Bool // overflow was handed out
	problem  []byte      // the 503 body
}

// compileAdaptive prepares ru, whose Adaptive is set, for admitAdaptive.
func compileAdaptive(ru *rule, clock Clock) {
	cfg := ru.Adaptive.normalized(ru.Name)
	_, system := clock.(systemClock)
	s := &adaptiveSet{cfg: cfg, name: ru.Name, clock: clock, system: system, epoch: clock.Now()}
	s.overflow = newAdaptiveLimiter(cfg, ru.Name, OverflowKey, s.epoch, s.epoch)
	s.keys.Store(&map[string]*AdaptiveLimiter{})
	s.problem = []byte(`{"type":"` + reducedCapacityType + `","title":"Service Unavailable","status":503,` +
		`"detail":"The server is at its concurrency limit; retry shortly.","violated-policies":[` + strconv.Quote(ru.Name) + "]}\n")
	ru.adaptive = s
}

const reducedCapacityType = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

// limiter returns the controller of key.
func (s *adaptiveSet) limiter(key string) *AdaptiveLimiter {
	if l, ok := (*s.keys.Load())[key]; ok {
		return l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := *s.keys.Load()
	if l, ok := m[key]; ok {
		return l
	}
	if len(m) >= s.cfg.MaxKeys {
		return s.sharedLimiter()
	}
	l := newAdaptiveLimiter(s.cfg, s.name, key, s.epoch, s.clock.Now())
	next := make(map[string]*AdaptiveLimiter, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[key] = l
	s.keys.Store(&next)
	return l
}

// sharedLimiter returns the controller shared by keyless requests and keys
// beyond MaxKeys.
func (s *adaptiveSet) sharedLimiter() *AdaptiveLimiter {
	if !s.shared.Load() {
		s.shared.Store(true)
	}
	return s.overflow
}

// states returns the state of every key, sorted by key.
func (s *adaptiveSet) states() []AdaptiveState {
	m := *s.keys.Load()
	out := make([]AdaptiveState, 0, len(m)+1)
	for _, l := range m {
		out = append(out, l.State())
	}
	if s.shared.Load() {
		out = append(out, s.overflow.State())
	}
	slices.SortFunc(out, func(a, b AdaptiveState) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// Adaptive returns the state of the adaptive rule named rule, one entry
// per key (one for a Global key), or nil if the limiter has no such rule.
func (l *Limiter) Adaptive(rule string) []AdaptiveState {
	for _, ru := range l.adaptive {
		if ru.Name == rule {
			return ru.adaptive.states()
		}
	}
	return nil
}

// now reads the rule's clock, in ns since its epoch: the monotonic clock
// alone for SystemClock.
func (s *adaptiveSet) now() int64 {
	if s.system {
		return int64(time.Since(s.epoch))
	}
	return int64(s.clock.Now().Sub(s.epoch))
}

// adaptiveHeld is one adaptive slot a request holds.
type adaptiveHeld struct {
	ru     *rule
	ticket AdaptiveTicket
}

// adaptiveDone releases a request's adaptive slots, once. Under Handler it
// lives in the request's statusWriter: one allocation for both.
type adaptiveDone struct {
	l      *Limiter
	w      http.ResponseWriter
	r      *http.Request
	rest   func() // the other rules' done
	held   []adaptiveHeld
	inline [2]adaptiveHeld // held's storage for up to two adaptive rules
	once   atomic.Bool
}

func (d *adaptiveDone) done() {
	if !d.once.CompareAndSwap(false, true) {
		return
	}
	d.rest()
	d.release(true)
}

// release frees every slot; sampled tells whether the request ran (its
// outcome is classified) or was stopped by another rule (ignored).
func (d *adaptiveDone) release(sampled bool) { releaseHeld(d.held, d.w, d.r, sampled) }

func releaseHeld(held []adaptiveHeld, w http.ResponseWriter, r *http.Request, sampled bool) {
	status := 0
	if s, ok := w.(interface{ Status() int }); ok {
		status = s.Status()
	}
	for _, h := range held {
		s := h.ru.adaptive
		now := s.now()
		v := SampleIgnore
		if sampled {
			v = s.cfg.Classify(r, status, h.ticket.elapsed(now))
		}
		h.ticket.release(now, v)
	}
}

// adaptiveCall returns the state of a request's adaptive slots: the one in
// w when w is the request's statusWriter, else a new one.
func adaptiveCall(w http.ResponseWriter) *adaptiveDone {
	if sw, ok := w.(*statusWriter); ok && sw.call.l == nil {
		return &sw.call
	}
	return new(adaptiveDone)
}

// admitAdaptive applies the adaptive rules, then the others. A request
// rejected by an adaptive rule never reaches the stores; one denied by
// another rule gives its adaptive slots back unsampled. The state of an
// admitted request is kept in its statusWriter when it has one (Handler),
// else in a new adaptiveDone; a rejection allocates neither.
func (l *Limiter) admitAdaptive(w http.ResponseWriter, r *http.Request) (func(), bool) {
	var inline [2]adaptiveHeld
	held := inline[:0]
	for _, ru := range l.adaptive {
		s := ru.adaptive
		key, err := ru.Key(r)
		var lim *AdaptiveLimiter
		switch {
		case err == nil:
			lim = s.limiter(compactKey(key))
		case ru.Shadow:
			l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: KeyError, Err: err, Request: r})
			continue
		case ru.onKeyError == RejectKeyError:
			releaseHeld(held, w, r, false)
			return l.keyFailed(w, r, ru, err)
		default:
			lim = s.sharedLimiter()
		}
		critical := s.cfg.Critical == nil || s.cfg.Critical(r)
		t := s.now()
		tk, ok := lim.acquire(t, ticketTimed|lim.sampleAt(t), critical)
		switch {
		case ok:
			held = append(held, adaptiveHeld{ru, tk})
			if len(l.observers) > 0 {
				l.observeResult(r, ru, adaptiveResult(lim, true), Denied, 0)
			}
		case ru.Shadow:
			l.observeResult(r, ru, adaptiveResult(lim, false), ShadowDenied, 0)
		default:
			res := adaptiveResult(lim, false)
			l.observeResult(r, ru, res, Denied, 0)
			releaseHeld(held, w, r, false)
			l.rejectAdaptive(w, r, ru, res)
			return noop, false
		}
	}
	rest := noop
	if len(l.rules) > 0 {
		var ok bool
		if rest, ok = l.admitRules(w, r); !ok {
			releaseHeld(held, w, r, false)
			return noop, false
		}
	}
	d := adaptiveCall(w)
	d.l, d.w, d.r, d.rest = l, w, r, rest
	d.held = append(d.inline[:0], held...)
	return d.done, true
}

func adaptiveResult(l *AdaptiveLimiter, ok bool) Result {
	limit := int(l.limit.Load())
	res := Result{Allowed: ok, Limit: Limit{Rate: limit, Period: time.Second}, Remaining: max(0, limit-int(l.inflight.Load()))}
	if !ok {
		res.RetryAfter = time.Second
	}
	return res
}

// rejectAdaptive answers a request over an adaptive limit: 503 with
// Retry-After, the reduced-capacity problem type and, with the IETF
// fields, the policy in the concurrent-requests unit. With a denied
// handler, that handler answers instead. The field values are shared by
// the rejections at one limit (see denyFields): no allocation.
func (l *Limiter) rejectAdaptive(w http.ResponseWriter, r *http.Request, ru *rule, res Result) {
	f := ru.adaptive.fields(ru, res.Limit.Rate)
	h := w.Header()
	if l.headers&HeadersIETF != 0 {
		addShared(h, hdrPolicy, f.vals[0:1:1])
		addShared(h, hdrRateLimit, f.vals[1:2:2])
	}
	if l.denied != nil {
		l.deny(w, r, nil, ru.Name, &res, nil)
		return
	}
	h[hdrRetryAfter] = f.vals[2:3:3]
	h[hdrCacheControl] = f.vals[3:4:4]
	h[hdrContentType] = f.vals[4:5:5]
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(ru.adaptive.problem)
}

// addShared adds the shared value v (length and capacity 1) to the field
// k: it becomes the field when the field is empty, else it is appended
// (which copies).
func addShared(h http.Header, k string, v []string) {
	if old := h[k]; len(old) > 0 {
		h[k] = append(old, v[0])
		return
	}
	h[k] = v
}

// fields returns the shared field values of a rejection at the limit:
// RateLimit-Policy, RateLimit, Retry-After, Cache-Control, Content-Type.
func (s *adaptiveSet) fields(ru *rule, limit int) *denyFields {
	if d := s.denial.Load(); d != nil && d.t == int64(limit) && d.vals == d.intact {
		return d
	}
	d := &denyFields{t: int64(limit)}
	d.intact = [5]string{
		ru.quotedName + ";q=" + strconv.Itoa(limit) + `;qu="concurrent-requests"`,
		ru.quotedName + ";r=0;t=1",
		"1",
		"no-store",
		"application/problem+json",
	}
	d.vals = d.intact
	s.denial.Store(d)
	return d
}

// recordStatus wraps w so that an adaptive rule's classifier sees the
// status code, when the limiter has adaptive rules.
func (l *Limiter) recordStatus(w http.ResponseWriter) http.ResponseWriter {
	if l.adaptive == nil {
		return w
	}
	if _, ok := w.(interface{ Status() int }); ok {
		return w
	}
	return &statusWriter{ResponseWriter: w}
}

// statusWriter records the status code written through it. It passes
// Flush and Hijack through (Unwrap serves http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
	call   adaptiveDone // the request's adaptive slots (adaptiveCall)
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Status returns the status written, 0 if none yet.
func (s *statusWriter) Status() int { return s.status }

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(s.ResponseWriter).Hijack()
}
