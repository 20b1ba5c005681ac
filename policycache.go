package ratelimit

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
	rules  [MaxRules]*rule
	limits [MaxRules]Limit
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
