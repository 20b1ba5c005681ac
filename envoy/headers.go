package envoy

import (
	"strconv"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/sluicehq/ratelimit"
)

// The fields the service asks Envoy to add to the client's response, as
// the core's middleware writes them (ratelimit.HeadersIETF): the policy of
// every limit that applied, the state of the most restrictive one and, on
// a denial, Retry-After.
const (
	hdrPolicy     = "RateLimit-Policy"
	hdrRateLimit  = "RateLimit"
	hdrRetryAfter = "Retry-After"
)

// setPolicy precomputes the limit's name in the fields and its
// RateLimit-Policy member: q is the capacity and w the seconds an empty
// quota takes to refill, which for a limit without burst is the unit under
// every algorithm.
func (l *limit) setPolicy() {
	l.metricName = policyName(l)
	l.policyName = strconv.Quote(l.metricName)
	l.policy = l.policyName + ";q=" + strconv.FormatUint(uint64(l.rpu), 10) + ";w=" + strconv.FormatInt(l.seconds, 10)
}

// policyName is the limit's name when it has a valid one, else its full key
// with every character the fields do not allow replaced by '_', cut to 64.
func policyName(l *limit) string {
	name := l.name
	if name == "" || !validName(name) {
		name = strings.Map(func(r rune) rune {
			if validRune(r) {
				return r
			}
			return '_'
		}, l.fullKey)
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

func validName(s string) bool {
	for _, r := range s {
		if !validRune(r) {
			return false
		}
	}
	return len(s) <= 64
}

func validRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_.:/", r)
}

// seconds rounds d up to whole seconds, never below zero.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// retryAfter is the Retry-After value of a denial: at least one second.
func retryAfter(res *ratelimit.Result) int64 { return max(1, seconds(res.RetryAfter)) }

// nextAfter is how long until more than res.Remaining units are available
// with no other traffic (the t parameter of an allowed request): the
// store's NextAfter when it reports one; under GCRA the time the first
// missing unit takes to come back; under a window its end.
func nextAfter(res *ratelimit.Result, alg ratelimit.Algorithm, l ratelimit.Limit) time.Duration {
	switch {
	case res.NextAfter > 0:
		return res.NextAfter
	case alg == ratelimit.GCRA:
		interval, capacity, remaining := int64(l.Interval()), int64(l.Capacity()), int64(res.Remaining)
		reset := int64(res.ResetAfter)
		return time.Duration(min(max(reset-interval*(capacity-remaining-1), 0), max(reset, interval)))
	}
	return res.ResetAfter
}

// rateLimitMember is the RateLimit field's member for res: r the quota
// left, t the seconds until more is available (allowed) or until the
// request would fit (denied, the Retry-After value).
func rateLimitMember(quotedName string, res *ratelimit.Result, alg ratelimit.Algorithm, l ratelimit.Limit) string {
	var buf [96]byte // a name of up to 64 characters, quoted, and two numbers: on the stack
	b := append(buf[:0], quotedName...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(0, res.Remaining)), 10)
	b = append(b, ";t="...)
	t := retryAfter(res)
	if res.Allowed {
		t = seconds(nextAfter(res, alg, l))
	}
	return string(strconv.AppendInt(b, t, 10))
}

// reportedBefore reports whether a is reported in the RateLimit field
// rather than b, as the core's middleware chooses: a denial over an
// admission, the longer wait among denials, the fewer remaining units
// among admissions, then the later next unit.
func reportedBefore(a, b *outcome, alg ratelimit.Algorithm) bool {
	ra, rb := &a.res, &b.res
	switch {
	case ra.Allowed != rb.Allowed:
		return !ra.Allowed
	case !ra.Allowed:
		return ra.RetryAfter > rb.RetryAfter
	case ra.Remaining != rb.Remaining:
		return ra.Remaining < rb.Remaining
	}
	na, nb := nextAfter(ra, alg, a.rate), nextAfter(rb, alg, b.rate)
	if na != nb {
		return na > nb
	}
	return ra.ResetAfter > rb.ResetAfter
}

// headers returns the fields for the outcomes of one request's enforced
// limits, or nil when none was decided by a store.
func headers(outs []outcome, alg ratelimit.Algorithm) []*core.HeaderValue {
	top, first, n := -1, -1, 0
	var policy strings.Builder // built only for two limits or more
	for i := range outs {
		o := &outs[i]
		if !o.decided || o.shadow {
			continue
		}
		switch n++; n {
		case 1:
			first = i
		case 2:
			policy.WriteString(outs[first].limit.policy)
			fallthrough
		default:
			policy.WriteString(", ")
			policy.WriteString(o.limit.policy)
		}
		if top < 0 || reportedBefore(o, &outs[top], alg) {
			top = i
		}
	}
	if top < 0 {
		return nil
	}
	t := &outs[top]
	p := t.limit.policy // one limit: its precomputed member
	if n > 1 {
		p = policy.String()
	}
	count := 2
	if !t.res.Allowed {
		count = 3
	}
	fields, hs := make([]core.HeaderValue, count), make([]*core.HeaderValue, count) // an allocation each
	fields[0].Key, fields[0].Value = hdrPolicy, p
	fields[1].Key, fields[1].Value = hdrRateLimit, rateLimitMember(t.limit.policyName, &t.res, alg, t.rate)
	if !t.res.Allowed {
		fields[2].Key, fields[2].Value = hdrRetryAfter, strconv.FormatInt(retryAfter(&t.res), 10)
	}
	for i := range fields {
		hs[i] = &fields[i]
	}
	return hs
}
