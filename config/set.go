package config

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/sluicehq/ratelimit"
)

// maxRules is the most rules a ratelimit.Limiter takes (NewRules panics
// past it); TestMaxRulesIsTheLimitersBound keeps the two in step.
const maxRules = 16

// Set is a compiled rules file ready to serve: one ratelimit.Limiter per
// distinct group of rules a request can match, and the index that sends
// each request to its group. A request is checked against the rules that
// can apply to it (at most 16, which Parse checks), all or
// nothing, as one Limiter checks its rules; rules whose match conditions
// rule the request out are not counted. A request that no rule can apply
// to passes through.
//
// The rules of every group share the Registry's stores, so a rule in
// several groups has one state. A Set is immutable and safe for concurrent
// use.
type Set struct {
	index  *index
	groups []*ratelimit.Limiter // nil: no limited rule in the group
	byName map[string]named
	rules  int
}

// Build returns the Set of c, with opts after c's own options in every
// Limiter.
func (c *Config) Build(opts ...ratelimit.Option) *Set {
	s := &Set{
		index:  c.index,
		groups: make([]*ratelimit.Limiter, len(c.groups)+1), // the last refuses
		byName: make(map[string]named, len(c.Rules)),
		rules:  len(c.Rules),
	}
	rules := make([]ratelimit.Rule, 0, maxRules)
	for gi, g := range c.groups {
		rules = rules[:0]
		o := slices.Clip(c.Options)
		for _, e := range g.entries {
			if fe := c.entries[e]; fe.rule >= 0 {
				rules = append(rules, fe.served)
			} else {
				o = append(o, ratelimit.WithSkip(fe.skip))
			}
		}
		if len(rules) == 0 {
			continue // unlimited rules only: nothing limits these requests
		}
		l := ratelimit.NewRulesLimiter(rules, append(o, opts...)...)
		s.groups[gi] = l
		for _, e := range g.entries {
			if fe := c.entries[e]; fe.rule >= 0 && s.byName[fe.name].l == nil {
				s.byName[fe.name] = named{l: l, limit: fe.served.Limit, ov: fe.ov}
			}
		}
	}
	s.groups[len(c.groups)] = refusing(append(slices.Clip(c.Options), opts...))
	return s
}

// errSplitPath is the key error of a request whose path reads as two paths
// that match different rules (see paths.go). Its ProblemDetail is the
// 400's detail, so the client is told what to change.
var errSplitPath = splitPathError{}

type splitPathError struct{}

func (splitPathError) Error() string {
	return "ratelimit: config: the path is not clean, and its clean form matches other rules"
}
func (splitPathError) Unwrap() error { return ratelimit.ErrNoKey }
func (splitPathError) ProblemDetail() string {
	return "The request path is not clean (a doubled slash, a dot segment or an encoded slash), " +
		"and read as written or cleaned it falls under different rate limits. Send the clean path."
}

// refusing returns the Limiter that answers every request it sees with a
// 400 problem response: its one rule's key never exists. opts are the
// Set's, for the response style, observer and carve-outs. Its rule never
// reaches its store; it fails closed only so that the Set's options may
// hold ratelimit.WithErrorHandler, which a Limiter without a rule failing
// closed refuses.
func refusing(opts []ratelimit.Option) *ratelimit.Limiter {
	rule := ratelimit.Rule{
		Name:         "config-split-path",
		Limit:        ratelimit.PerSecond(1),
		Key:          func(*http.Request) (string, error) { return "", errSplitPath },
		OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable},
	}
	return ratelimit.NewRulesLimiter([]ratelimit.Rule{rule}, append(opts, ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: http.StatusBadRequest}))...)
}

// Limiter returns the Limiter that decides r, or nil when no rule can
// apply to r. A request whose path is not clean, and whose clean form
// would match other rules than the path as written ("//api/login" against
// a rule on "/api/login"), is decided by a Limiter that answers 400: the
// rules never guess which path the router will serve.
func (s *Set) Limiter(r *http.Request) *ratelimit.Limiter {
	g := s.index.group(r)
	if g < 0 {
		return nil
	}
	return s.groups[g]
}

// Rules returns the number of limited rules in s.
func (s *Set) Rules() int { return s.rules }

// Handler returns next wrapped by s: each request is decided by the
// Limiter of its group, as that Limiter's Handler decides it.
func (s *Set) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Handler(nil)")
	}
	return &setHandler{set: s, next: next, hs: s.handlers(next)}
}

// handlers returns the handler of each group around next.
func (s *Set) handlers(next http.Handler) []http.Handler {
	hs := make([]http.Handler, len(s.groups))
	for i, l := range s.groups {
		if l != nil {
			hs[i] = l.Handler(next)
		} else {
			hs[i] = next
		}
	}
	return hs
}

type setHandler struct {
	set  *Set
	next http.Handler
	hs   []http.Handler
}

func (h *setHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.set.serve(h.hs, h.next, w, r)
}

func (s *Set) serve(hs []http.Handler, next http.Handler, w http.ResponseWriter, r *http.Request) {
	if g := s.index.group(r); g >= 0 {
		hs[g].ServeHTTP(w, r)
		return
	}
	next.ServeHTTP(w, r)
}

// Admit is Limiter.Admit on the Limiter of r's group (for framework
// adapters); a request no rule can apply to is admitted.
func (s *Set) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	if l := s.Limiter(r); l != nil {
		return l.Admit(w, r)
	}
	return func() {}, true
}

// named is a rule of a Set as Peek and Reset find it: the Limiter of one
// of the groups that hold it, its limit and its overrides.
type named struct {
	l     *ratelimit.Limiter
	limit ratelimit.Limit
	ov    *overrides
}

// Peek is Limiter.Peek on the rule named rule, whichever groups hold it,
// reading key as the middleware decides it: a key with an override of its
// own limit is read under that limit (Limiter.PeekUnder); a blocked key
// (limit 0) is never allowed, and reads as not allowed with nothing left
// and no Retry-After, without asking the store; an unlimited key reads as
// allowed with a zero Limit (no limit applies to it). The error wraps
// ratelimit.ErrUnknownRule for a name s does not have.
func (s *Set) Peek(ctx context.Context, rule, key string) (ratelimit.Result, error) {
	n := s.byName[rule]
	if n.l == nil {
		return ratelimit.Result{}, fmt.Errorf("%w %q", ratelimit.ErrUnknownRule, rule)
	}
	if n.ov != nil {
		if o := n.ov.lookup(key); o != nil {
			switch o.kind {
			case blocked:
				return ratelimit.Result{Limit: n.limit}, nil
			case unlimited:
				return ratelimit.Result{Allowed: true}, nil
			}
			return n.l.PeekUnder(ctx, rule, key, o.limit)
		}
	}
	return n.l.Peek(ctx, rule, key)
}

// Reset is Limiter.Reset on the rule named rule: its state is shared by
// every group that holds it.
func (s *Set) Reset(ctx context.Context, rule, key string) error {
	n := s.byName[rule]
	if n.l == nil {
		return fmt.Errorf("%w %q", ratelimit.ErrUnknownRule, rule)
	}
	return n.l.Reset(ctx, rule, key)
}
