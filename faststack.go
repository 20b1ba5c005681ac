package ratelimit

import (
	"math"
	"math/bits"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/ratelimit/internal/fieldval"
	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/internal/problem"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// fastStack is the direct path of stacked rules on one in-process store: a
// rate with a daily quota, say. Their checks are one prepared batch, decided
// all-or-nothing in one engine call, as the general path's TakeAll decides
// them; the reported rule's fields are built from pre-formatted parts as
// fastRule builds a single rule's, and a denial's body is built once per
// set of denying rules.
//
// A quota's window moves with the calendar, so the prepared batch and the
// policy that names the quota's limit are a plan, rebuilt when a request
// falls outside the windows it was built for (once a day for a daily quota).
type fastStack struct {
	ms     *memstore.Handle
	l      *Limiter
	system bool // the store and the limiter read SystemClock
	quotas bool // some rule is a quota: the plan holds for its windows only
	rules  []*rule
	// keyOf[i] is the earlier rule whose KeyFunc is rule i's own func value
	// (the same closure), or -1: the request's key is extracted once.
	keyOf [memstore.MaxPrepared]int8
	plan  atomic.Pointer[stackPlan]
	// events is the plan of Allow, which decides under the static rules
	// alone (see keyRequests): nil when every rule is a quota. event is
	// its check when it has one rule, taken alone as a lone rule's is.
	events *stackPlan
	event  *memstore.Prepared
	// bodies[top][set] is the 429 body of a denial by the rules of the
	// bit set, top first: see Verdict's violated.
	bodies [memstore.MaxPrepared][1 << memstore.MaxPrepared][]byte
}

// stackPlan is the prepared batch and the fields of the rules under the
// limits of the windows [from, until) of the limiter's clock.
type stackPlan struct {
	check       *memstore.PreparedBatch
	from, until int64
	report      [memstore.MaxPrepared]*fastRule // rule i's fields when it is reported
	limits      [memstore.MaxPrepared]Limit     // rule i's limit in these windows
}

// prepareStack compiles the direct path of a limiter of 2 to
// memstore.MaxPrepared enforced rules, each static or a static Quota,
// without cost, Concurrency, settlement, pacing or shadow, all on one
// *memory.Store, with the default IETF fields, no denied handler and no
// observers (adaptive rules are a step before it). The others take the
// general path.
func (l *Limiter) prepareStack() {
	n := len(l.rules)
	if n < 2 || n > memstore.MaxPrepared || l.enforced != n || l.slots || l.paced || l.settled ||
		l.headers != HeadersIETF || l.denied != nil || len(l.observers) > 0 {
		return
	}
	st, ok := l.rules[0].Store.(*memory.Store)
	if !ok {
		return
	}
	s := &fastStack{l: l, rules: l.rules, ms: new(memstore.Handle)}
	for _, ru := range l.rules {
		if other, ok := ru.Store.(*memory.Store); !ok || other != st || ru.LimitFunc != nil || ru.QuotaFunc != nil ||
			ru.Cost != nil || ru.Algorithm == Concurrency || ru.pacer != nil {
			return
		}
		s.quotas = s.quotas || !ru.Quota.IsZero()
	}
	for i, ru := range l.rules {
		s.keyOf[i] = -1
		for j := range i {
			if funcValue(l.rules[j].Key) == funcValue(ru.Key) {
				s.keyOf[i] = int8(j)
				break
			}
		}
	}
	st.Engine(s.ms)
	s.system = s.ms.Clock == stores.SystemClock() && l.clock == stores.SystemClock()
	if s.replan(l.clock.Now().UnixNano()) == nil {
		return // a static rule the store would refuse: the general path reports it
	}
	var static []*rule
	for _, ru := range l.rules {
		if ru.static {
			static = append(static, ru)
		}
	}
	if len(static) > 0 {
		s.events = s.newPlan(static, 0)
	}
	if len(static) == 1 {
		req := stores.Request{Rule: static[0].Name, Limit: static[0].Limit, Algorithm: static[0].Algorithm, Cost: 1}
		s.event = s.ms.Engine.Prepare(memstore.Valid(&req))
	}
	for top := range n {
		for set := range 1 << n {
			if set&(1<<top) == 0 || bits.OnesCount(uint(set)) < 2 {
				continue
			}
			names := []string{l.rules[top].Name}
			for i := range n {
				if i != top && set&(1<<i) != 0 {
					names = append(names, l.rules[i].Name)
				}
			}
			s.bodies[top][set] = problem.Denied(names)
		}
	}
	l.stack = s
}

// replan builds and installs the plan for the limiter's time lnow, or
// returns nil when a rule's request is invalid.
func (s *fastStack) replan(lnow int64) *stackPlan {
	p := s.newPlan(s.rules, lnow)
	if p != nil {
		s.plan.Store(p)
	}
	return p
}

// newPlan builds the plan of rules, a subset of the stack's in its order,
// for the limiter's time lnow, or returns nil when a rule's request is
// invalid.
func (s *fastStack) newPlan(rules []*rule, lnow int64) *stackPlan {
	var reqs [memstore.MaxPrepared]memstore.Request
	p := &stackPlan{from: math.MinInt64, until: math.MaxInt64}
	items := make([]string, len(rules))
	for i, ru := range rules {
		req := stores.Request{Rule: ru.Name, Limit: ru.Limit, Algorithm: ru.Algorithm, Cost: 1}
		if !ru.Quota.IsZero() {
			req.Limit, req.Window = ru.quotaWindow(ru.Quota, time.Unix(0, lnow))
			p.from, p.until = max(p.from, req.Window.Start), min(p.until, req.Window.End)
		}
		if req.Validate() != nil {
			return nil
		}
		reqs[i] = memstore.Valid(&req)
		items[i] = policyItem(ru.Name, req.Limit, ru.Algorithm)
		p.limits[i] = req.Limit
	}
	p.check = s.ms.Engine.PrepareBatch(reqs[:len(rules)])
	policy := strings.Join(items, ", ")
	for i, ru := range rules {
		p.report[i] = &fastRule{
			policy:  policy,
			quoted:  ru.quotedName,
			quotedR: ru.quotedName + ";r=",
			problem: ru.problem,
			gcra:    ru.Algorithm == GCRA,
			unit:    int64(ru.Limit.Interval()), // GCRA's: a quota counts in a window
			units:   int64(ru.Limit.Capacity()),
		}
	}
	return p
}

// admit is the direct path of a request under the stacked rules, as
// fastRule.admit is for one rule: handled false, having consumed and
// written nothing, when r needs the general path (a key function failed,
// or the response already carries rate-limit fields).
func (s *fastStack) admit(w http.ResponseWriter, r *http.Request) (ok, handled bool) {
	h := w.Header()
	if nested(h) {
		return false, false
	}
	var res [memstore.MaxPrepared]memstore.Result
	p, _, now, handled := s.take(r, &res)
	if !handled {
		return false, false
	}
	top, denied := p.top(&res)
	f := p.report[top]
	if denied == 0 {
		f.allowed(h, &res[top], now)
		return true, true
	}
	f.deny(h, &res[top], now)
	body := s.rules[top].problem
	if denied&(denied-1) != 0 {
		body = s.bodies[top][denied]
	}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(body)
	return false, true
}

// take is the decision on r under the stacked rules, every rule's result
// in res: the plan it was taken under, the limiter's time lnow (for the
// quotas' windows) and the store's, now. ok is false, nothing consumed,
// when r needs the general path (a key function failed).
func (s *fastStack) take(r *http.Request, res *[memstore.MaxPrepared]memstore.Result) (p *stackPlan, lnow, now int64, ok bool) {
	var keys [memstore.MaxPrepared]string
	for i, ru := range s.rules {
		if j := s.keyOf[i]; j >= 0 {
			keys[i] = keys[j]
			continue
		}
		key, err := ru.Key(r)
		if err != nil {
			return nil, 0, 0, false
		}
		keys[i] = compactKey(key)
	}
	lnow, now = s.now()
	p = s.plan.Load()
	if lnow < p.from || lnow >= p.until {
		if p = s.replan(lnow); p == nil {
			return nil, 0, 0, false
		}
	}
	p.check.Take(keys[:], res[:], now)
	return p, lnow, now, true
}

// top is the index of the reported rule among res, as reportedBefore
// picks it, and the bit set of the rules that denied.
func (p *stackPlan) top(res *[memstore.MaxPrepared]memstore.Result) (top int, denied uint) {
	n := p.check.Len()
	for i := range n {
		if !res[i].Allowed {
			denied |= 1 << i
		}
		if i > 0 && p.reportedBefore(i, top, res) {
			top = i
		}
	}
	return top, denied
}

// reportedBefore is reportedBefore of rules a and b (neither Concurrency).
func (p *stackPlan) reportedBefore(a, b int, res *[memstore.MaxPrepared]memstore.Result) bool {
	ra, rb := &res[a], &res[b]
	switch {
	case ra.Allowed != rb.Allowed:
		return !ra.Allowed
	case !ra.Allowed:
		return ra.RetryAfter > rb.RetryAfter
	case ra.Remaining != rb.Remaining:
		return ra.Remaining < rb.Remaining
	}
	if na, nb := p.nextAfter(a, ra), p.nextAfter(b, rb); na != nb {
		return na > nb
	}
	return ra.ResetAfter > rb.ResetAfter
}

// nextAfter is nextAfter of rule i's result res.
func (p *stackPlan) nextAfter(i int, res *memstore.Result) int64 {
	if res.Next > 0 {
		return res.Next
	}
	if f := p.report[i]; f.gcra {
		return fieldval.GCRANext(res.ResetAfter, f.unit, f.units, res.Remaining)
	}
	return res.ResetAfter
}

// funcValue identifies a func value: two are equal only if they are the
// same closure (the same code over the same variables), which gives the
// same key for a request. Closures made apart compare different, even of
// one constructor with the same arguments.
func funcValue(f KeyFunc) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&f)) }

// now reads the limiter's clock, for the quotas' windows, and the store's,
// for the decision: one read when both are the system clock.
func (s *fastStack) now() (lnow, now int64) {
	if s.system {
		now = systemFastClock.unixNano()
		return now, now
	}
	now = s.ms.Clock.Now().UnixNano()
	if !s.quotas {
		return now, now
	}
	return s.l.clock.Now().UnixNano(), now
}
