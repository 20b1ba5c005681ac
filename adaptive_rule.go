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

// adaptiveDone holds a request's adaptive slots until it is released.
type adaptiveDone struct {
	r      *http.Request
	held   []adaptiveHeld
	inline [2]adaptiveHeld // held's storage for up to two adaptive rules
}

// release frees every slot; sampled tells whether the request ran (its
// outcome is classified with status) or was stopped by another rule
// (ignored). A nil d holds nothing.
func (d *adaptiveDone) release(sampled bool, status int) {
	if d == nil {
		return
	}
	releaseHeld(d.held, d.r, sampled, status)
}

func releaseHeld(held []adaptiveHeld, r *http.Request, sampled bool, status int) {
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

// acquireAdaptive takes a slot under every adaptive rule. It returns the
// slots held or, when a rule rejects the request or its key, nil, having
// set the verdict *v and given back the slots taken. A rejection does not
// allocate: the slots are gathered on the stack and moved to the heap only
// once every adaptive rule has admitted the request.
func (l *Limiter) acquireAdaptive(r *http.Request, v *Verdict) *adaptiveDone {
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
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
			continue
		case ru.onKeyError == RejectKeyError:
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
			releaseHeld(held, r, false, 0)
			*v = Verdict{l: l, r: r, kind: verdictKeyError, top: ru, err: err}
			return nil
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
				l.observers.result(r, ru, adaptiveResult(lim, true), OutcomeDenied, 0)
			}
		case ru.Shadow:
			l.observers.result(r, ru, adaptiveResult(lim, false), OutcomeShadowDenied, 0)
		default:
			res := adaptiveResult(lim, false)
			l.observers.result(r, ru, res, OutcomeDenied, 0)
			releaseHeld(held, r, false, 0)
			*v = Verdict{l: l, r: r, kind: verdictAdaptive, top: ru, res: res, limit: res.Limit}
			return nil
		}
	}
	d := &adaptiveDone{r: r}
	d.held = append(d.inline[:0], held...)
	return d
}

func adaptiveResult(l *AdaptiveLimiter, ok bool) Result {
	limit := int(l.limit.Load())
	res := Result{Allowed: ok, Limit: Limit{Rate: limit, Period: time.Second}, Remaining: max(0, limit-int(l.inflight.Load()))}
	if !ok {
		res.RetryAfter = time.Second
	}
	return res
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
