package ratelimit

import (
	"bufio"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/stores"
)

// adaptiveSet is a compiled adaptive rule: a controller per key, up to
// MaxKeys, then one shared by the rest. Lookups read an immutable map
// through an atomic pointer: no lock and no allocation on the request path.
type adaptiveSet struct {
	cfg      adaptive.Config
	name     string
	clock    Clock
	system   bool                       // clock is SystemClock: read the monotonic clock alone
	epoch    time.Time                  // the time every controller of the rule counts from
	denial   atomic.Pointer[denyFields] // the fields of a rejection at the last limit rejected
	keys     atomic.Pointer[map[string]*adaptive.Limiter]
	mu       sync.Mutex // serialises additions
	overflow *adaptive.Limiter
	shared   atomic.Bool // overflow was handed out
	problem  []byte      // the 503 body
}

// sameSettings reports whether o was built from the same settings as s: the
// same normalised Config but for its functions (which cannot be compared),
// and the same clock.
func (s *adaptiveSet) sameSettings(o *adaptiveSet) bool {
	a, b := s.cfg, o.cfg
	a.Classify, a.Critical, a.OnWindow = nil, nil, nil
	b.Classify, b.Critical, b.OnWindow = nil, nil, nil
	if !reflect.DeepEqual(a, b) || s.system != o.system {
		return false
	}
	// The value's comparability, not its type's: a comparable struct may
	// hold a Clock of a type that is not, and == would panic on it.
	return s.system || reflect.ValueOf(s.clock).Comparable() && s.clock == o.clock
}

// compileAdaptive prepares ru, whose Adaptive is set, for admitAdaptive.
func compileAdaptive(ru *rule, clock Clock) {
	cfg := ru.Adaptive.Normalize(ru.Name)
	system := clock == stores.SystemClock()
	s := &adaptiveSet{cfg: cfg, name: ru.Name, clock: clock, system: system, epoch: clock.Now()}
	s.overflow = adaptive.NewRule(cfg, ru.Name, adaptive.OverflowKey, s.epoch, s.epoch)
	s.keys.Store(&map[string]*adaptive.Limiter{})
	s.problem = []byte(`{"type":"` + reducedCapacityType + `","title":"Service Unavailable","status":503,` +
		`"detail":"The server is at its concurrency limit; retry shortly.","violated-policies":[` + strconv.Quote(ru.Name) + "]}\n")
	ru.adaptive.Store(s)
}

const reducedCapacityType = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

// limiter returns the controller of key.
func (s *adaptiveSet) limiter(key string) *adaptive.Limiter {
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
	l := adaptive.NewRule(s.cfg, s.name, key, s.epoch, s.clock.Now())
	next := make(map[string]*adaptive.Limiter, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[key] = l
	s.keys.Store(&next)
	return l
}

// sharedLimiter returns the controller shared by keyless requests and keys
// beyond MaxKeys.
func (s *adaptiveSet) sharedLimiter() *adaptive.Limiter {
	if !s.shared.Load() {
		s.shared.Store(true)
	}
	return s.overflow
}

// states returns the state of every key, sorted by key.
func (s *adaptiveSet) states() []adaptive.State {
	m := *s.keys.Load()
	out := make([]adaptive.State, 0, len(m)+1)
	for _, l := range m {
		out = append(out, l.State())
	}
	if s.shared.Load() {
		out = append(out, s.overflow.State())
	}
	slices.SortFunc(out, func(a, b adaptive.State) int {
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
func (l *Limiter) Adaptive(rule string) []adaptive.State {
	for _, ru := range l.adaptive {
		if ru.Name == rule {
			return ru.adaptive.Load().states()
		}
	}
	return nil
}

// now reads the rule's clock: the monotonic clock alone for SystemClock
// (a time that carries only the epoch's wall reading moved by it).
func (s *adaptiveSet) now() time.Time {
	if s.system {
		return s.epoch.Add(time.Since(s.epoch))
	}
	return s.clock.Now()
}

// adaptiveHeld is one adaptive slot a request holds, and the rule state it
// was taken from.
type adaptiveHeld struct {
	s      *adaptiveSet
	ticket adaptive.Ticket
}

// adaptiveDone holds a request's adaptive slots until it is released. It
// holds them by value (no pointer into itself), so that the caller's copy
// stays on the stack until hold copies it for an admitted request.
type adaptiveDone struct {
	r      *http.Request
	n      int             // slots held: inline's first ones, then more
	inline [2]adaptiveHeld // the slots of up to two adaptive rules
	more   []adaptiveHeld  // beyond two
}

func (d *adaptiveDone) add(h adaptiveHeld) {
	if d.n < len(d.inline) {
		d.inline[d.n] = h
	} else {
		d.more = append(d.more, h)
	}
	d.n++
}

// release frees every slot; sampled tells whether the request ran (its
// outcome is classified with status) or was stopped by another rule
// (ignored). A nil d holds nothing; a second release frees nothing.
func (d *adaptiveDone) release(sampled bool, status int) {
	if d == nil || d.n == 0 {
		return
	}
	n, more := d.n, d.more
	d.n, d.more = 0, nil
	releaseHeld(d.inline[:min(n, len(d.inline))], d.r, sampled, status)
	releaseHeld(more, d.r, sampled, status)
}

func releaseHeld(held []adaptiveHeld, r *http.Request, sampled bool, status int) {
	for _, h := range held {
		s := h.s
		now := s.now()
		v := adaptive.SampleIgnore
		if sampled {
			v = s.cfg.Classify(r, status, h.ticket.ElapsedAt(now))
		}
		h.ticket.ReleaseAt(now, v)
	}
}

// acquireAdaptive takes a slot under every adaptive rule into *d, the
// caller's. It reports whether the request was admitted; when a rule
// rejects the request or its key, it sets the verdict *v and gives back the
// slots taken. It does not allocate: the slots are copied to the heap only
// once the whole request is admitted (hold).
func (l *Limiter) acquireAdaptive(r *http.Request, v *Verdict, d *adaptiveDone) bool {
	d.r = r
	for _, ru := range l.adaptive {
		s := ru.adaptive.Load()
		key, err := ru.Key(r)
		var lim *adaptive.Limiter
		switch {
		case err == nil:
			lim = s.limiter(compactKey(key))
		case ru.Shadow:
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
			continue
		case !ru.onKeyError.shared:
			l.observers.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeKeyError, Err: err, Request: r})
			d.release(false, 0)
			*v = Verdict{l: l, r: r, kind: verdictKeyError, top: ru, err: err}
			return false
		default:
			lim = s.sharedLimiter()
		}
		critical := s.cfg.Critical == nil || s.cfg.Critical(r)
		tk, ok := lim.AcquireAt(s.now(), critical)
		switch {
		case ok:
			d.add(adaptiveHeld{s, tk})
			if len(l.observers) > 0 {
				l.observers.result(r, ru, adaptiveResult(lim, true), OutcomeDenied, 0)
			}
		case ru.Shadow:
			l.observers.result(r, ru, adaptiveResult(lim, false), OutcomeShadowDenied, 0)
		default:
			res := adaptiveResult(lim, false)
			l.observers.result(r, ru, res, OutcomeDenied, 0)
			d.release(false, 0)
			*v = Verdict{l: l, r: r, kind: verdictAdaptive, top: ru, res: res, limit: res.Limit}
			return false
		}
	}
	return true
}

// rejectionFields returns the shared field values of a rejection at limit:
// RateLimit-Policy, RateLimit, Retry-After, Cache-Control, Content-Type.
// They are built once per limit and shared by the rejections at it (see
// denyFields for why sharing them is safe), so a rejection allocates none.
func (s *adaptiveSet) rejectionFields(quotedName string, limit int) *denyFields {
	if d := s.denial.Load(); d != nil && d.t == int64(limit) && d.vals == d.intact {
		return d
	}
	d := &denyFields{t: int64(limit)}
	d.intact = [5]string{
		quotedName + ";q=" + strconv.Itoa(limit) + `;qu="concurrent-requests"`,
		quotedName + ";r=0", // requests in flight: no effective window; Retry-After says when to come back
		"1",
		"no-store",
		"application/problem+json",
	}
	d.vals = d.intact
	s.denial.Store(d)
	return d
}

// addShared adds the shared value v (length and capacity 1) to the field
// k: it becomes the field when the field is empty, else it is appended,
// which copies.
func addShared(h http.Header, k string, v []string) {
	if old := h[k]; len(old) > 0 {
		h[k] = append(old, v[0])
		return
	}
	h[k] = v
}

func adaptiveResult(l *adaptive.Limiter, ok bool) Result {
	limit := l.Limit()
	res := Result{Allowed: ok, Limit: Limit{Rate: limit, Period: time.Second}, Remaining: max(0, limit-l.InFlight())}
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
