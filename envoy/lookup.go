package envoy

import (
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match is the limit that applies to one descriptor of a request, and the
// value each entry is counted under (the wildcard pattern for entries
// matched through a share_threshold wildcard, else the entry's value).
type match struct {
	limit  *limit
	shared []string // per entry: the shared pattern, or ""; nil when none
}

// lookup finds the limit of d in domain as the reference does: each entry
// descends one level, trying key_value, then a wildcard of the level, then
// key alone; the limit applies only when it sits at the level of the last
// entry (a request with more entries than the tree has levels matches
// nothing). It returns a zero match when no limit applies.
func (r *Rules) lookup(domain string, d *rlpb.RateLimitDescriptor) match {
	root := r.domains[domain]
	if root == nil {
		return match{}
	}
	if d.GetLimit() != nil {
		return match{limit: overrideLimit(domain, d)}
	}
	entries := d.GetEntries()
	level, prev := root.children, root
	var m match
	for i, e := range entries {
		next := level[e.GetKey()+"_"+e.GetValue()]
		wildcard := ""
		if next == nil {
			for _, w := range prev.wildcards {
				if strings.HasPrefix(e.GetKey()+"_"+e.GetValue(), w[:len(w)-1]) {
					next, wildcard = level[w], w
					break
				}
			}
		}
		if next == nil {
			next = level[e.GetKey()]
		}
		if wildcard != "" && next != nil && next.shareThreshold {
			if m.shared == nil {
				m.shared = make([]string, len(entries))
			}
			m.shared[i] = strings.TrimPrefix(next.wildcardPattern, e.GetKey()+"_")
		}
		if next != nil && next.limit != nil && i == len(entries)-1 {
			m.limit = next.limit
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		level, prev = next.children, next
	}
	if m.limit == nil {
		return match{}
	}
	return m
}

// bucketKey is the key of the descriptor's counter within its domain:
// key_value_ for each entry, as the reference's cache key (without its
// window), with shared wildcard patterns in place of the values.
func bucketKey(d *rlpb.RateLimitDescriptor, shared []string) string {
	entries := d.GetEntries()
	n := 0
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for i, e := range entries {
		b.WriteString(e.GetKey())
		b.WriteByte('_')
		if i < len(shared) && shared[i] != "" {
			b.WriteString(shared[i])
		} else {
			b.WriteString(e.GetValue())
		}
		b.WriteByte('_')
	}
	return b.String()
}
