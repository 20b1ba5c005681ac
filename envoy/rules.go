package envoy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// Rules are compiled configuration files: the descriptor tree of every
// domain. A Rules is immutable and safe for concurrent use; a reload
// compiles a new one and swaps it in whole.
type Rules struct {
	domains map[string]*node
	limits  int // rate_limit blocks, unlimited ones included
}

// node is one descriptor of the tree: its children by final key (key, or
// key_value), the wildcard final keys among them in file order, and its
// limit.
type node struct {
	children        map[string]*node
	wildcards       []string
	limit           *limit
	shareThreshold  bool
	wildcardPattern string // the final key, when share_threshold is set
}

// limit is a compiled rate_limit block.
type limit struct {
	fullKey    string // domain.key_value.key: the reference's name for it
	rpu        uint32
	unit       pb.RateLimitResponse_RateLimit_Unit
	seconds    int64 // the unit's length
	unlimited  bool
	shadow     bool
	quota      bool
	name       string
	replaces   []string
	current    *pb.RateLimitResponse_RateLimit // the current_limit of statuses; read-only
	metricName string                          // its name in events: bounded, from the configuration
	policyName string                          // its name in the RateLimit fields, quoted
	policy     string                          // its RateLimit-Policy member
	at         Problem                         // where it is configured, for errors; zero for an override
}

// Limits returns the number of rate_limit blocks in force.
func (r *Rules) Limits() int { return r.limits }

// Domains returns the number of domains.
func (r *Rules) Domains() int { return len(r.domains) }

// Compile builds Rules from parsed files. Two files of one domain, or two
// descriptors with the same key and value in one list, are errors, as in
// the reference.
func Compile(files ...*File) (*Rules, error) {
	r := &Rules{domains: make(map[string]*node)}
	var problems ConfigErrors
	seen := make(map[string]string)
	for _, f := range files {
		if prev, ok := seen[f.Domain]; ok {
			problems = append(problems, Problem{File: f.Name, Line: 1, Col: 1, Path: "domain",
				Message: fmt.Sprintf("duplicate domain %q (also in %s)", f.Domain, prev)})
			continue
		}
		seen[f.Domain] = f.Name
		root := &node{children: make(map[string]*node)}
		r.load(f, root, f.Domain+".", f.Descriptors, "descriptors", &problems)
		r.domains[f.Domain] = root
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return r, nil
}

func (r *Rules) load(f *File, parent *node, prefix string, ds []Descriptor, path string, problems *ConfigErrors) {
	for i := range ds {
		d := &ds[i]
		at := fmt.Sprintf("%s[%d]", path, i)
		fk := d.finalKey()
		if _, dup := parent.children[fk]; dup {
			*problems = append(*problems, Problem{File: f.Name, Line: d.Line, Col: d.Col, Path: at,
				Message: fmt.Sprintf("duplicate descriptor composite key %q", prefix+fk)})
			continue
		}
		n := &node{children: make(map[string]*node), shareThreshold: d.ShareThreshold}
		if d.ShareThreshold {
			n.wildcardPattern = fk
		}
		if d.RateLimit != nil {
			n.limit = compileLimit(prefix+fk, d)
			n.limit.at = Problem{File: f.Name, Line: d.Line, Col: d.Col, Path: at + ".rate_limit.requests_per_unit"}
			r.limits++
		}
		if strings.HasSuffix(fk, "*") {
			parent.wildcards = append(parent.wildcards, fk)
		}
		r.load(f, n, prefix+fk+".", d.Descriptors, at+".descriptors", problems)
		parent.children[fk] = n
	}
}

func compileLimit(fullKey string, d *Descriptor) *limit {
	rl := d.RateLimit
	secs, _ := unitSeconds(rl.Unit)
	unit := pb.RateLimitResponse_RateLimit_Unit(pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rl.Unit)])
	l := &limit{
		fullKey: fullKey, rpu: rl.RequestsPerUnit, unit: unit, seconds: secs,
		unlimited: rl.Unlimited, shadow: d.ShadowMode, quota: d.QuotaMode,
		name: rl.Name, replaces: rl.Replaces,
		current: &pb.RateLimitResponse_RateLimit{Name: rl.Name, RequestsPerUnit: rl.RequestsPerUnit, Unit: unit},
	}
	l.setPolicy()
	return l
}

// overrideLimit is the limit a descriptor carries itself (Envoy's
// per-route limit override); it never runs in shadow mode, as in the
// reference.
func overrideLimit(domain string, d *rlpb.RateLimitDescriptor) *limit {
	o := d.GetLimit()
	unit := pb.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	secs, ok := unitSeconds(unit.String())
	if !ok {
		return nil // an unknown unit: no limit applies
	}
	l := &limit{
		fullKey: domain + "." + descriptorKey(d), rpu: o.GetRequestsPerUnit(), unit: unit, seconds: secs,
		current: &pb.RateLimitResponse_RateLimit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unit},
	}
	l.setPolicy()
	l.metricName = domain + ".override" // the descriptor's values are not bounded
	return l
}

// countable reports why alg cannot count every limit of r: a sliding log
// keeps one timestamp per event, so a limit above stores.MaxSlidingLog is
// refused at its line, as the store would refuse each call.
func (r *Rules) countable(alg ratelimit.Algorithm) error {
	if alg != ratelimit.SlidingLog {
		return nil
	}
	var problems ConfigErrors
	var walk func(n *node)
	walk = func(n *node) {
		if l := n.limit; l != nil && !l.unlimited && l.rpu > stores.MaxSlidingLog {
			p := l.at
			p.Message = fmt.Sprintf("%d requests per %s is more than a sliding log keeps (%d): use the default algorithm (GCRA) for an exact limit this large",
				l.rpu, strings.ToLower(l.unit.String()), stores.MaxSlidingLog)
			problems = append(problems, p)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	for _, root := range r.domains {
		walk(root)
	}
	if len(problems) == 0 {
		return nil
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.String(), b.String()) })
	return problems
}

// period is the limit's unit as a duration.
func (l *limit) period() time.Duration { return time.Duration(l.seconds) * time.Second }

// rate is the limit as the core counts it. A limit of 0 requests has no
// valid ratelimit.Limit: the service denies it without asking the store.
func (l *limit) rate() ratelimit.Limit { return ratelimit.Limit{Rate: int(l.rpu), Period: l.period()} }

// descriptorKey is key_value.key_value..., the reference's key of a
// descriptor that carries its own limit.
func descriptorKey(d *rlpb.RateLimitDescriptor) string {
	var b strings.Builder
	for i, e := range d.GetEntries() {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.GetKey())
		if e.GetValue() != "" {
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}
