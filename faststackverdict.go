package ratelimit

import (
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// check is Check's decision on the direct path of stacked rules: the
// middleware's (take), with the verdict written as the general path's
// conclude writes it. It reports false, having consumed nothing, when r
// needs the general path (a key function failed).
func (s *fastStack) check(r *http.Request, v *Verdict) bool {
	var res [memstore.MaxPrepared]memstore.Result
	p, lnow, _, ok := s.take(r, &res)
	if !ok {
		return false
	}
	top, denied := p.top(&res)
	ru := s.rules[top]
	*v = Verdict{l: s.l, r: r, kind: verdictAllowed, top: ru, res: res[top].Under(p.limits[top]), limit: p.limits[top]}
	if s.quotas { // a static limiter's policy is its precomputed one
		v.policy = p.report[top].policy
	}
	if s.l.needNow {
		v.now = time.Unix(0, lnow)
	}
	if denied == 0 {
		return true
	}
	v.kind = verdictDenied
	if denied&(denied-1) != 0 { // by several rules: the reported one first
		v.violated = []string{ru.Name}
		for i, other := range s.rules {
			if i != top && denied&(1<<i) != 0 {
				v.violated = append(v.violated, other.Name)
			}
		}
	}
	return true
}

// allow is AllowN of one event for key on the direct path of stacked
// rules: the static rules decided in one batch, as keyRequests and
// takeGroup decide them, the most restrictive result reported (one static
// rule is taken alone, as takeGroup takes it).
func (s *fastStack) allow(key string) Result {
	p := s.events
	key = compactKey(key)
	now := systemFastClock.unixNano()
	if s.ms.Clock != stores.SystemClock() {
		now = s.ms.Clock.Now().UnixNano()
	}
	if s.event != nil {
		res := s.event.Take(key, now)
		return res.Under(p.limits[0])
	}
	var keys [memstore.MaxPrepared]string
	for i := range p.check.Len() {
		keys[i] = key
	}
	var res [memstore.MaxPrepared]memstore.Result
	p.check.Take(keys[:], res[:], now)
	top, _ := p.top(&res)
	return res[top].Under(p.limits[top])
}

// checkHolding is Check's decision on the direct path of a rule that holds
// something once admitted (see takeHolding): the verdict as the general
// path writes it, holding the Concurrency slot or the settled admission
// that Done gives back or settles. It reports false, having consumed
// nothing, when r needs the general path (its key function failed).
func (l *Limiter) checkHolding(f *fastRule, r *http.Request, v *Verdict) bool {
	ru := l.rules[0]
	key, err := ru.Key(r)
	if err != nil {
		return false
	}
	d := directHeld{f: f, key: compactKey(key), now: f.now()}
	res := f.check.TakeHeld(d.key, d.now, &d.hold)
	*v = Verdict{l: l, r: r, kind: verdictDenied, top: ru, res: res.Under(ru.Limit), limit: ru.Limit}
	if !res.Allowed {
		return true
	}
	v.kind = verdictAllowed
	d.slot = res.Slot
	v.direct = &directDone{l: l, d: d}
	return true
}
