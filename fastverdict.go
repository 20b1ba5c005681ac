package ratelimit

import (
	"net/http"

	"github.com/sluicehq/ratelimit/internal/memstore"
)

// direct returns the limiter's direct path, or nil when its requests take
// the general one: it has a single rule whose check was prepared when the
// Limiter was built (see prepareFast), and no adaptive rule.
func (l *Limiter) direct() *fastRule {
	if l.adaptive == nil {
		return l.rulesDirect()
	}
	return nil
}

// rulesDirect returns the direct path of the limiter's rules other than
// adaptive, which the middleware takes after the adaptive step, or nil.
func (l *Limiter) rulesDirect() *fastRule {
	if len(l.rules) == 1 {
		return l.rules[0].fast
	}
	return nil
}

// checkDirect is Check's decision on the direct path, with its steps
// (observers, shadow): it makes *v the verdict on r and reports true, or reports false, having consumed
// nothing, when r needs the general path (its key function failed). The
// verdict is written as the general path's is; only the decision is
// shared with the middleware's direct path.
func (l *Limiter) checkDirect(f *fastRule, r *http.Request, v *Verdict) bool {
	if f.pace != nil {
		return false // Check waits for a paced turn on the general path
	}
	if f.holds {
		return l.checkHolding(f, r, v)
	}
	ru := l.rules[0]
	start := f.obs.start()
	res, _, ok := f.take(nil, r, ru)
	if !ok {
		return false
	}
	f.observe(r, ru, &res, start)
	if f.shadow {
		*v = Verdict{l: l, r: r} // counted, never enforced nor reported
		return true
	}
	*v = Verdict{l: l, r: r, kind: verdictAllowed, top: ru, limit: ru.Limit, res: res.Under(ru.Limit)}
	if !res.Allowed {
		v.kind = verdictDenied
	}
	return true
}

// allowDirect is Allow on the direct path: one event for key under the
// limiter's one rule, decided by its prepared check and reported to the
// observers (with a nil Event.Request), as the general path would.
func (l *Limiter) allowDirect(f *fastRule, key string) Result {
	ru := l.rules[0]
	start := f.obs.start()
	var res memstore.Result
	f.check.TakeInto(compactKey(key), f.now(), &res)
	f.observe(nil, ru, &res, start)
	return res.Under(ru.Limit)
}
