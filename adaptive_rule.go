package ratelimit

import (
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
// MaxKeys (a new key then takes the place of an idle one), then one shared
// by the rest. Lookups read an immutable map
// through an atomic pointer: no lock and no allocation on the request path.
type adaptiveSet struct {
	cfg      adaptive.Config
	name     string
	clock    Clock
	system   bool                       // clock is SystemClock: read the monotonic clock alone
	timeAll  bool                       // time every request: a fake clock, or a Classify that reads elapsed
	epoch    time.Time                  // the time every controller of the rule counts from
	denial   atomic.Pointer[denyFields] // the fields of a rejection at the last limit rejected
	keys     atomic.Pointer[map[string]*adaptive.Limiter]
	first    atomic.Pointer[keyedLimiter] // the first key's controller: a Global rule's only one, found without hashing
	mu       sync.Mutex                   // serialises additions
	nextScan time.Time                    // under mu: no key was idle; look again from then (idleKey)
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
	// DefaultClassify ignores elapsed: on the system clock the controller
	// then reads the clock only for the requests it samples. A Classify of
	// the user's is given every request's elapsed time, and a fake clock
	// (tests, simulations) is read for every request, so that what it
	// decides is a function of the times it is given.
	s.timeAll = !system || ru.Adaptive.Classify != nil
	s.overflow = adaptive.NewRule(cfg, ru.Name, adaptive.OverflowKey, s.epoch, s.epoch)
	s.keys.Store(&map[string]*adaptive.Limiter{})
	s.problem = []byte(`{"type":"` + reducedCapacityType + `","title":"Service Unavailable","status":503,` +
		`"detail":"The server is at its concurrency limit; retry shortly.","violated-policies":[` + strconv.Quote(ru.Name) + "]}\n")
	ru.adaptive.Store(s)
}

const reducedCapacityType = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

// keyedLimiter is a key and its controller.
type keyedLimiter struct {
	key string
	l   *adaptive.Limiter
}

// limiter returns the controller of key.
func (s *adaptiveSet) limiter(key string) *adaptive.Limiter {
	if f := s.first.Load(); f != nil && f.key == key {
		return f.l
	}
	if l, ok := (*s.keys.Load())[key]; ok {
		return l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := *s.keys.Load()
	if l, ok := m[key]; ok {
		return l
	}
	now := s.now()
	idle, evict := "", false
	if len(m) >= s.cfg.MaxKeys {
		if idle, evict = s.idleKey(m, now); !evict {
			return s.sharedLimiter()
		}
	}
	next := make(map[string]*adaptive.Limiter, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	if evict {
		delete(next, idle)
		if f := s.first.Load(); f != nil && f.key == idle {
			s.first.Store(nil)
		}
	}
	l := adaptive.NewRule(s.cfg, s.name, key, s.epoch, now)
	next[key] = l
	s.keys.Store(&next)
	if len(m) == 0 {
		s.first.Store(&keyedLimiter{key, l})
	}
	return l
}

// idleKey returns a key of m (the rule's MaxKeys keys) whose controller
// is idle at now (adaptive.Limiter.IdleAt), and whether there is one. A request
// that looked its controller up just before may still take a slot of it:
// that slot is given back to the controller it came from, and the key's
// next request gets a new one. Keys are scanned at most once a Window
// while none is idle, so that a flood of new keys costs a lookup each.
// The caller holds mu.
func (s *adaptiveSet) idleKey(m map[string]*adaptive.Limiter, now time.Time) (string, bool) {
	if now.Before(s.nextScan) {
		return "", false
	}
	for k, l := range m {
		if l.IdleAt(now) {
			return k, true
		}
	}
	s.nextScan = now.Add(s.cfg.Window)
	return "", false
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

// AdaptiveLimit returns the current limit of the adaptive rule named rule:
// its controller's for a Global key, the sum of its keys' for a keyed rule
// (Initial before any request has reached it), 0 if the limiter has no
// such rule. It reads a few atomics and allocates nothing: cheap enough to
// call on every request, as the SeatsFunc of a fair.Scheduler that queues
// requests in front of the limiter:
//
//	cfg.SeatsFunc = func() int { return l.AdaptiveLimit("inflight") }
//	h := fair.New(cfg).Handler(l.Handler(mux))
func (l *Limiter) AdaptiveLimit(rule string) int {
	for _, ru := range l.adaptive {
		if ru.Name == rule {
			return ru.adaptive.Load().limit()
		}
	}
	return 0
}

// limit is the rule's limit: the sum of its controllers'.
func (s *adaptiveSet) limit() int {
	m := *s.keys.Load()
	n := 0
	if f := s.first.Load(); f != nil && len(m) == 1 {
		n = f.l.Limit()
	} else {
		for _, l := range m {
			n += l.Limit()
		}
	}
	if s.shared.Load() {
		n += s.overflow.Limit()
	}
	if n == 0 {
		return s.cfg.Initial
	}
	return n
}

// now reads the rule's clock: the monotonic clock alone for SystemClock
// (a time that carries only the epoch's wall reading moved by it).
func (s *adaptiveSet) now() time.Time {
	if s.system {
		return s.epoch.Add(time.Since(s.epoch))
	}
	return s.clock.Now()
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

// setRejectionFields sets on h the fields of a rejection at limit of the
// rule named quotedName: RateLimit-Policy and RateLimit under HeadersIETF
// (added to any an outer limiter set), Retry-After, Cache-Control and, for
// a response with a problem body, Content-Type. The values are shared (see
// rejectionFields).
func (s *adaptiveSet) setRejectionFields(h http.Header, quotedName string, limit int, style HeaderStyle, problem bool) {
	f := s.rejectionFields(quotedName, limit)
	if style&HeadersIETF != 0 {
		if len(h) == 0 { // nothing to add to: no lookup first
			h[hdrPolicy], h[hdrRateLimit] = f.vals[0:1:1], f.vals[1:2:2]
		} else {
			addShared(h, hdrPolicy, f.vals[0:1:1])
			addShared(h, hdrRateLimit, f.vals[1:2:2])
		}
	}
	h[hdrRetryAfter] = f.vals[2:3:3]
	h[hdrCacheControl] = f.vals[3:4:4]
	if problem {
		h[hdrContentType] = f.vals[4:5:5]
	}
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
