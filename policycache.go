package ratelimit

import "strings"

// policy is the RateLimit-Policy value of d: "" for the limiter's
// precomputed one, when every enforced rule is static and decided under its
// own limit, otherwise one item per enforced rule under the limit it was
// checked against (dynamic, or a fallback's share).
func (l *Limiter) policy(d *decision, rvs []ruleVerdict) string {
	precomputed := l.policyHeader != ""
	for i := range rvs[:d.enforced] {
		if rvs[i].req.Limit != rvs[i].ru.Limit {
			precomputed = false
		}
	}
	if precomputed {
		return ""
	}
	if c := l.policies.Load(); c != nil && c.matches(rvs[:d.enforced]) {
		return c.value
	}
	items := make([]string, d.enforced)
	for i := range items {
		rv := &rvs[i]
		items[i] = policyItem(rv.ru.Name, rv.req.Limit, rv.ru.Algorithm)
	}
	p := strings.Join(items, ", ")
	l.policies.Store(newPolicyCache(rvs[:d.enforced], p))
	return p
}

// policyCache is the RateLimit-Policy value last built for a request whose
// enforced rules were checked under limits of their own choosing (a quota's
// window, a LimitFunc's plan): the same rules under the same limits, as
// nearly every request of a quota's day brings, reuse it rather than
// formatting one item per rule.
//
// A limiter keeps one: requests that alternate between limits (tenants of
// several plans) replace it, at the cost of one allocation each.
type policyCache struct {
	n      int
	rules  [maxRules]*rule
	limits [maxRules]Limit
	value  string
}

// matches reports whether rvs are c's rules under c's limits.
func (c *policyCache) matches(rvs []ruleVerdict) bool {
	if len(rvs) != c.n {
		return false
	}
	for i := range rvs {
		if rvs[i].ru != c.rules[i] || rvs[i].req.Limit != c.limits[i] {
			return false
		}
	}
	return true
}

// newPolicyCache records value as the policy of rvs.
func newPolicyCache(rvs []ruleVerdict, value string) *policyCache {
	c := &policyCache{n: len(rvs), value: value}
	for i := range rvs {
		c.rules[i], c.limits[i] = rvs[i].ru, rvs[i].req.Limit
	}
	return c
}
