package config

import (
	"net/http"
	"regexp"
	"time"

	"github.com/sluicehq/ratelimit"
	"go.yaml.in/yaml/v3"
)

var ruleFields = []string{"name", "key", "key_kind", "limit", "algorithm", "quota", "concurrency",
	"shadow", "on_store_error", "store", "match", "unlimited", "overrides"}

var algorithms = map[string]ratelimit.Algorithm{
	"gcra": ratelimit.GCRA, "sliding-window": ratelimit.SlidingWindow, "fixed-window": ratelimit.FixedWindow,
	"sliding-log": ratelimit.SlidingLog,
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,64}$`)

// compiledRule is one rule of the file: as a Limiter of its own checks it
// (rule), as the groups of a Set check it (served: the index has decided
// part of its match), or, for an unlimited rule, its skip in those groups;
// and its entry in the index.
type compiledRule struct {
	rule, served *ratelimit.Rule
	ov           *overrides // the rule's per-key limits, nil without
	skip         func(*http.Request) bool
	name         string // an unlimited rule's (a limited one's is rule.Name)
	entry        entry
}

// rule compiles one rule. A rule with problems has neither rule nor skip.
func (c *compiler) rule(n *yaml.Node, path string) compiledRule {
	f := c.fields(n, path, ruleFields...)
	if f == nil {
		return compiledRule{}
	}
	before := len(c.errs)
	r := &ratelimit.Rule{}
	if v, ok := f["name"]; !ok {
		c.fail(n, path+".name", "missing")
	} else if name, ok := c.str(v.val, path+".name"); ok {
		switch prev := c.names[name]; {
		case !nameRE.MatchString(name):
			c.fail(v.val, path+".name", "%q: use 1-64 letters, digits or -_.:/", name)
		case prev != nil:
			c.fail(v.val, path+".name", "duplicate rule name %q (first at line %d): names key the state", name, prev.Line)
		default:
			c.names[name] = v.val
		}
		r.Name = name
	}
	match, rest, ent := c.match(f, path)
	if v, ok := f["unlimited"]; ok {
		if u, ok := c.boolean(v.val, path+".unlimited"); ok && u {
			for _, other := range ruleFields {
				if o, set := f[other]; set && other != "name" && other != "match" && other != "unlimited" {
					c.fail(o.key, path+"."+other, "contradicts unlimited: an unlimited rule only names requests (match) that no rule limits")
				}
			}
			if len(c.errs) > before {
				return compiledRule{}
			}
			if rest == nil {
				rest = func(*http.Request) bool { return true }
			}
			return compiledRule{skip: rest, name: r.Name, entry: ent}
		}
	}
	c.ruleKey(f, n, path, r)
	c.ruleLimit(f, n, path, r)
	if v, ok := f["shadow"]; ok {
		r.Shadow, _ = c.boolean(v.val, path+".shadow")
	}
	if v, ok := f["on_store_error"]; ok {
		r.OnStoreError, _ = c.failure(v.val, path+".on_store_error")
	}
	if v, ok := f["store"]; ok {
		r.Store = c.store(v.val, path+".store")
	}
	var ov *overrides
	if v, ok := f["overrides"]; ok {
		if r.Limit.Rate == 0 {
			c.fail(v.key, path+".overrides", "overrides need a limit or concurrency rule")
		} else {
			c.concPeriod = r.Limit.Period
			ov = c.overrides(v.val, path+".overrides", r.Algorithm)
		}
	}
	if len(c.errs) > before {
		return compiledRule{}
	}
	served := *r
	attach(r, match, ov)
	attach(&served, rest, ov)
	return compiledRule{rule: r, served: &served, ov: ov, entry: ent}
}

func (c *compiler) ruleKey(f map[string]field, n *yaml.Node, path string, r *ratelimit.Rule) {
	v, ok := f["key"]
	if !ok {
		c.fail(n, path+".key", "missing: name a key from the registry (%v)", sortedKeys(c.reg.Keys))
		return
	}
	name, ok := c.str(v.val, path+".key")
	if !ok {
		return
	}
	if r.Key = c.reg.Keys[name]; r.Key == nil {
		c.fail(v.val, path+".key", "unknown key %q (the registry has %v)", name, sortedKeys(c.reg.Keys))
	}
	r.KeyKind = name
	if v, ok := f["key_kind"]; ok {
		r.KeyKind, _ = c.str(v.val, path+".key_kind")
	}
}

// ruleLimit reads exactly one of limit, quota and concurrency, and the
// algorithm.
func (c *compiler) ruleLimit(f map[string]field, n *yaml.Node, path string, r *ratelimit.Rule) {
	var set []string
	for _, k := range []string{"limit", "quota", "concurrency"} {
		if _, ok := f[k]; ok {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		c.fail(n, path, "needs one of limit, quota, concurrency or unlimited: true")
		return
	}
	if len(set) > 1 {
		c.fail(f[set[1]].key, path+"."+set[1], "contradicts %s: a rule has one of limit, quota and concurrency", set[0])
		return
	}
	alg, hasAlg := ratelimit.GCRA, false
	if v, ok := f["algorithm"]; ok {
		if s, ok := c.str(v.val, path+".algorithm"); ok {
			if a, known := algorithms[s]; known {
				alg, hasAlg = a, true
			} else {
				c.fail(v.val, path+".algorithm", "unknown algorithm %q: use gcra, sliding-window, fixed-window or sliding-log (or concurrency: n)", s)
			}
		}
	}
	switch set[0] {
	case "limit":
		l, ok := c.limit(f["limit"].val, path+".limit", false)
		if ok && alg != ratelimit.GCRA && l.Burst != 0 && l.Burst != l.Rate {
			c.fail(f["limit"].val, path+".limit", "%s counts the rate per window and takes no burst", alg)
		} else if ok && alg == ratelimit.SlidingLog {
			c.logBound(f["limit"].val, path+".limit", l)
		}
		r.Limit, r.Algorithm = l, alg
	case "quota":
		if hasAlg && alg != ratelimit.FixedWindow {
			c.fail(f["algorithm"].val, path+".algorithm", "contradicts quota: a quota is a calendar fixed window")
		}
		r.Quota, _ = c.quota(f["quota"].val, path+".quota")
	case "concurrency":
		if hasAlg {
			c.fail(f["algorithm"].val, path+".algorithm", "contradicts concurrency: a concurrency rule has its own algorithm")
		}
		r.Limit, _ = c.concurrency(f["concurrency"].val, path+".concurrency")
		r.Algorithm = ratelimit.Concurrency
	}
}

// limit reads the short form ("100/min burst 20") or the long form
// ({rate: 100, per: 1m, burst: 20}).
func (c *compiler) limit(n *yaml.Node, path string, allowZero bool) (ratelimit.Limit, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		l, err := parseRate(n.Value, allowZero)
		if err != nil {
			c.fail(n, path, "%v", err)
			return l, false
		}
		return l, true
	}
	f := c.fields(n, path, "rate", "per", "burst")
	if f == nil {
		return ratelimit.Limit{}, false
	}
	var l ratelimit.Limit
	good := true
	if v, ok := f["rate"]; !ok {
		c.fail(n, path+".rate", "missing")
		good = false
	} else if l.Rate, ok = c.count(v.val, path+".rate", 0); !ok {
		good = false
	}
	if v, ok := f["per"]; !ok {
		c.fail(n, path+".per", "missing")
		good = false
	} else if d, err := parsePeriod(v.val.Value); err != nil || v.val.Kind != yaml.ScalarNode {
		c.fail(v.val, path+".per", "%v", err)
		good = false
	} else {
		l.Period = d
	}
	if v, ok := f["burst"]; ok {
		if l.Burst, ok = c.count(v.val, path+".burst", 0); !ok {
			good = false
		}
	}
	if !good {
		return l, false
	}
	if err := checkLimit(l, allowZero); err != nil {
		c.fail(n, path, "%v", err)
		return l, false
	}
	return l, true
}

// concurrency reads "n" or {max: n, slot_ttl: 1m}.
func (c *compiler) concurrency(n *yaml.Node, path string) (ratelimit.Limit, bool) {
	l := ratelimit.Limit{Period: time.Minute}
	if n.Kind == yaml.ScalarNode {
		var ok bool
		l.Rate, ok = c.count(n, path, 1)
		return l, ok
	}
	f := c.fields(n, path, "max", "slot_ttl")
	if f == nil {
		return l, false
	}
	v, ok := f["max"]
	if !ok {
		c.fail(n, path+".max", "missing")
		return l, false
	}
	if l.Rate, ok = c.count(v.val, path+".max", 1); !ok {
		return l, false
	}
	if v, ok := f["slot_ttl"]; ok {
		if l.Period, ok = c.duration(v.val, path+".slot_ttl"); !ok {
			return l, false
		}
	}
	if err := checkLimit(l, false); err != nil {
		c.fail(n, path, "%v", err)
		return l, false
	}
	return l, true
}
