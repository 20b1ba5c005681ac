package config

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit"
	"go.yaml.in/yaml/v3"
)

// overrideKind says what an override does to its key.
type overrideKind uint8

const (
	ownLimit  overrideKind = iota // the key has its own limit
	blocked                       // limit 0: every request is denied
	unlimited                     // the rule does not apply to the key
)

type override struct {
	limit ratelimit.Limit
	kind  overrideKind
	line  int // where the key was given, for duplicates
}

// overrides are a rule's per-key exceptions, in an open-addressing hash
// table (see table.go): a lookup is one hash and, most often, one probe,
// whether it hits or misses.
type overrides struct {
	table
	anyBlock bool
}

// blockCost is more than any limit's capacity: the middleware denies a
// request that costs more than the capacity without asking the store, so a
// blocked key is denied at once and keeps no state.
const blockCost = 1 << 31

// overrides reads a list of {key | keys, limit}, where limit is a limit of
// the rule's algorithm, 0 (block) or unlimited.
func (c *compiler) overrides(n *yaml.Node, path string, alg ratelimit.Algorithm) *overrides {
	if n.Kind == yaml.MappingNode {
		return c.overrideMap(n, path, alg)
	}
	if n.Kind != yaml.SequenceNode {
		c.fail(n, path, "want a mapping of key: limit or a list of {key, limit}, got %s", kindName(n))
		return nil
	}
	ov := &overrides{table: newTable(len(n.Content))}
	for i, e := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		f := c.fields(e, p, "key", "keys", "limit")
		if f == nil {
			continue
		}
		var keys []string
		var keyNode *yaml.Node
		switch k, ks := f["key"], f["keys"]; {
		case k.key != nil && ks.key != nil:
			c.fail(ks.key, p+".keys", "contradicts key: give key or keys")
		case k.key != nil:
			keyNode = k.val
			if s, ok := c.str(k.val, p+".key"); ok {
				keys = []string{s}
			}
		case ks.key != nil:
			keyNode = ks.val
			keys = c.strs(ks.val, p+".keys")
		default:
			c.fail(e, p+".key", "missing")
		}
		lv, ok := f["limit"]
		if !ok {
			c.fail(e, p+".limit", "missing: a limit, 0 to block or unlimited")
			continue
		}
		o, ok := c.overrideLimit(lv.val, p+".limit", "", alg)
		if !ok {
			continue
		}
		ov.anyBlock = ov.anyBlock || o.kind == blocked
		for j, k := range keys {
			o.line = elem(keyNode, j).Line
			if prev := ov.insert(k, o); prev != nil {
				c.fail(elem(keyNode, j), p, "key %q already has an override (line %d)", k, prev.line)
			}
		}
	}
	return ov
}

// overrideMap reads the compact form, a mapping of key to limit.
func (c *compiler) overrideMap(n *yaml.Node, path string, alg ratelimit.Algorithm) *overrides {
	ov := &overrides{table: newTable(len(n.Content) / 2)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, ok := c.str(k, path)
		if !ok {
			continue
		}
		o, ok := c.overrideLimit(v, path, key, alg)
		o.line = k.Line
		if prev := ov.insert(key, o); prev != nil {
			c.fail(k, path, "key %q already has an override (line %d)", key, prev.line)
			continue
		}
		ov.anyBlock = ov.anyBlock || (ok && o.kind == blocked)
	}
	return ov
}

// overrideLimit reads the limit of an override at path base, or at
// base.key when key is set. Limits given as text are parsed once per
// distinct text: a file's thousands of overrides share a few limits.
func (c *compiler) overrideLimit(n *yaml.Node, base, key string, alg ratelimit.Algorithm) (override, bool) {
	path := base
	if key != "" {
		path = "" // built on a problem only
	}
	at := func() string {
		if path == "" {
			path = base + "." + key
		}
		return path
	}
	if n.Kind == yaml.ScalarNode {
		if o, ok := c.seenLimits[n.Value]; ok && n.Tag == "!!str" && alg == ratelimit.GCRA {
			return o, true
		}
		switch {
		case n.Value == "unlimited":
			return override{kind: unlimited}, true
		case n.Tag == "!!int" && n.Value == "0":
			return override{kind: blocked}, true
		case alg == ratelimit.Concurrency:
			m, ok := c.count(n, at(), 0)
			if m == 0 {
				return override{kind: blocked}, ok
			}
			return override{limit: ratelimit.Limit{Rate: m, Period: c.concPeriod}, kind: ownLimit}, ok
		}
	}
	if alg == ratelimit.Concurrency {
		c.fail(n, at(), "a concurrency override is a slot count, 0 or unlimited")
		return override{}, false
	}
	l, ok := c.limit(n, at(), true)
	if !ok {
		return override{}, false
	}
	o := override{limit: l, kind: ownLimit}
	if l.Rate == 0 {
		o = override{kind: blocked}
	}
	if o.kind == ownLimit && alg != ratelimit.GCRA && l.Burst != 0 && l.Burst != l.Rate {
		c.fail(n, at(), "%s counts the rate per window and takes no burst", alg)
		return override{}, false
	}
	if o.kind == ownLimit && alg == ratelimit.SlidingLog && !c.logBound(n, at(), l) {
		return override{}, false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && alg == ratelimit.GCRA {
		if c.seenLimits == nil {
			c.seenLimits = map[string]override{}
		}
		c.seenLimits[n.Value] = o
	}
	return o, true
}

// attach turns match conditions and overrides into the rule's LimitFunc,
// QuotaFunc and Cost. The rule keeps its Limit, for Peek and metrics.
func attach(r *ratelimit.Rule, match func(*http.Request) bool, ov *overrides) {
	if match != nil {
		// The middleware extracts the key before asking LimitFunc, so a
		// request the rule does not match must not fail for want of a key.
		key := r.Key
		r.Key = func(req *http.Request) (string, error) {
			if !match(req) {
				return "", nil
			}
			return key(req)
		}
	}
	if !r.Quota.IsZero() {
		if match != nil {
			q := r.Quota
			r.QuotaFunc = func(req *http.Request) (ratelimit.Quota, bool) { return q, match(req) }
		}
		return
	}
	if match == nil && ov == nil {
		return
	}
	base, key := r.Limit, r.Key // key: the wrapped one when matched, same answer
	r.LimitFunc = func(req *http.Request) (ratelimit.Limit, bool) {
		if match != nil && !match(req) {
			return base, false
		}
		if ov != nil {
			if k, err := key(req); err == nil {
				if o := ov.lookup(k); o != nil {
					switch o.kind {
					case unlimited:
						return base, false
					case blocked:
						return base, true
					}
					return o.limit, true
				}
			}
		}
		return base, true
	}
	if ov != nil && ov.anyBlock {
		r.Cost = func(req *http.Request) int {
			if k, err := key(req); err == nil {
				if o := ov.lookup(k); o != nil && o.kind == blocked {
					return blockCost
				}
			}
			return 1
		}
	}
}
