package ratelimitclient

import (
	"strings"
	"sync/atomic"
	"time"
)

// A server's RateLimit value changes with nearly every response, but only
// in its numbers: `"default";r=41;t=16` follows `"default";r=42;t=17`, with
// the same RateLimit-Policy. A partition keeps the last pair it parsed as a
// template: the quotas they gave, and where the digits of the r and t
// parameters they were read from are in the RateLimit value. A pair that
// differs from the template only in those digits gives the template's
// quotas with the digits' values: reading it compares the text between the
// numbers and reads the numbers, a fraction of a parse. Any other pair is
// parsed.
//
// The quotas are the same as a parse's: a run of digits after a
// parameter's "=" is an Integer whatever run it is (up to 15 digits), and
// what follows it, the same text as the template's, is not a digit or a
// decimal point (the template's number would not have been an Integer).
// Which items are quotas (those with both r and t) depends only on the
// text that is compared.

// template is a RateLimit value and RateLimit-Policy line parsed, with
// where the value's numbers are.
type template struct {
	value     string
	policy    string // the RateLimit-Policy line, when hasPolicy
	hasPolicy bool
	quotas    [maxItems]quota // what the pair gave
	n         int
	nums      [2 * maxItems]number // in the order they appear in value
	k         int
	matched   atomic.Bool  // a value other than value was read from it
	misses    atomic.Int64 // pairs that did not match it
}

// number is where the digits of an item's r or t parameter are in a
// template's value.
type number struct {
	at    span
	quota int  // the quota the item gave, -1 when none
	t     bool // the t parameter; r when false
}

// newTemplate returns the template of the RateLimit value v, parsed to
// items, and the RateLimit-Policy lines policy (at most one), which gave
// obs; from is the item each of its quotas was read from.
func newTemplate(v string, policy []string, items []sfItem, from *[maxItems]int, obs *observation) *template {
	tp := &template{value: v, quotas: obs.quotas, n: obs.n}
	if len(policy) == 1 {
		tp.policy, tp.hasPolicy = policy[0], true
	}
	var quotaOf [maxItems]int
	for i := range quotaOf {
		quotaOf[i] = -1
	}
	for k := range obs.n {
		quotaOf[from[k]] = k
	}
	for i, it := range items {
		for _, nb := range [...]number{{it.rAt, quotaOf[i], false}, {it.tAt, quotaOf[i], true}} {
			if nb.at.to == 0 {
				continue // not a number: compared as text
			}
			k := tp.k // insertion sort: r mostly comes before t
			for ; k > 0 && tp.nums[k-1].at.from > nb.at.from; k-- {
				tp.nums[k] = tp.nums[k-1]
			}
			tp.nums[k] = nb
			tp.k++
		}
	}
	return tp
}

// samePolicy reports whether the RateLimit-Policy lines are the template's.
func (tp *template) samePolicy(lines []string) bool {
	if len(lines) == 0 {
		return !tp.hasPolicy
	}
	return tp.hasPolicy && lines[0] == tp.policy
}

// read stores in obs the quotas of the RateLimit value v, capped as a
// parse caps them (see capCount), and reports whether v differs from the
// template's only in the digits of its numbers; obs keeps no quota when
// it does not. It does not allocate.
func (tp *template) read(v string, maxDelay time.Duration, obs *observation) bool {
	copy(obs.quotas[:tp.n], tp.quotas[:tp.n])
	obs.n = tp.n
	i, o := 0, 0 // positions in v and in the template's value
	for _, nb := range tp.nums[:tp.k] {
		lit := tp.value[o:nb.at.from]
		if !strings.HasPrefix(v[i:], lit) {
			return tp.miss(obs)
		}
		i += len(lit)
		var n int64
		j := i
		for ; j < len(v) && isDigit(v[j]); j++ {
			n = n*10 + int64(v[j]-'0')
		}
		if j == i || j-i > 15 {
			return tp.miss(obs) // no Integer, or one the parser refuses
		}
		if nb.quota >= 0 {
			q := &obs.quotas[nb.quota]
			if nb.t {
				q.setT(n, maxDelay)
			} else {
				q.remaining = capCount(n)
			}
		}
		i, o = j, int(nb.at.to)
	}
	if v[i:] != tp.value[o:] {
		return tp.miss(obs)
	}
	return true
}

// miss takes back what read stored in obs, and reports false.
func (tp *template) miss(obs *observation) bool {
	clear(obs.quotas[:tp.n])
	obs.n = 0
	return false
}

// templateCache keeps a partition's RateLimit template.
type templateCache struct {
	last atomic.Pointer[template]
}

// read stores in obs the quotas of the RateLimit value v with the
// RateLimit-Policy lines policy, and reports whether it read them from the
// template; when it did not, the caller parses them and keeps them.
func (c *templateCache) read(v string, policy []string, maxDelay time.Duration, obs *observation) bool {
	tp := c.last.Load()
	if tp == nil || !tp.samePolicy(policy) || !tp.read(v, maxDelay, obs) {
		return false
	}
	if !tp.matched.Load() && v != tp.value {
		tp.matched.Store(true)
	}
	return true
}

// keep makes the RateLimit value v, parsed to items, with the
// RateLimit-Policy lines policy, which gave obs, the template, in one
// allocation; from is the item each quota of obs was read from. A template
// that has not matched a value since it was made is replaced only at the
// first, second, fourth, eighth... pair that did not match it: a server
// whose values change in more than their numbers on every response costs
// an allocation on a few of them only.
func (c *templateCache) keep(v string, policy []string, items []sfItem, from *[maxItems]int, obs *observation) {
	if tp := c.last.Load(); tp != nil && !tp.matched.Load() {
		if m := tp.misses.Add(1); m&(m-1) != 0 {
			return
		}
	}
	c.last.Store(newTemplate(v, policy, items, from, obs))
}
