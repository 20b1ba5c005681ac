package ratelimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/ratelimit/internal/fieldval"
)

// HeaderStyle selects the rate-limit fields written on limited responses.
type HeaderStyle uint8

const (
	// HeadersIETF writes the fields of draft-ietf-httpapi-ratelimit-headers-11
	// (May 2026), the default:
	//
	//	RateLimit-Policy: "default";q=100;w=60
	//	RateLimit: "default";r=42;t=17
	//
	// q is the policy's capacity (Burst, or Rate) and w the seconds an empty
	// quota takes to refill: the Period for window algorithms, rounded up to
	// whole seconds, and Capacity*Period/Rate for GCRA. r is the available
	// quota and t the effective window, in seconds rounded up: the time
	// within which the client can use no more than r, which is when one more
	// unit becomes available (revision 10's wording of t). Under GCRA that
	// is the time one unit takes to come back, never more than
	// Period/Rate; under a fixed window or calendar quota, the window's end;
	// under a sliding window, when the weighted count next drops by one. On
	// a denial t is the time until the request would fit, which is also the
	// Retry-After value.
	//
	// A Concurrency rule counts requests in flight, not requests per
	// window: its policy member carries the quota unit the draft registers
	// for that, "name";q=N;qu="concurrent-requests", and its RateLimit member
	// has r (free slots) and no t, as slots come back when requests finish,
	// not at a time. With several rules the policy field lists all of them
	// and RateLimit reports the most restrictive: the rule that denied, or
	// on an allowed request the rate rule with the least quota left, and
	// among those the one whose next unit comes back last (a Concurrency
	// rule only when no rate rule applied).
	HeadersIETF HeaderStyle = 1 << iota

	// HeadersLegacy writes the de-facto X-RateLimit-Limit, X-RateLimit-Remaining
	// and X-RateLimit-Reset fields. X-RateLimit-Reset is a Unix time in
	// seconds (as GitHub's API), not a delta: when the quota is full again,
	// or on a denial when to retry. An allowed request under a Concurrency
	// rule has no X-RateLimit-Reset (slots come back when requests finish).
	HeadersLegacy

	// HeadersNone writes no rate-limit fields; 429 responses still carry
	// Retry-After.
	HeadersNone HeaderStyle = 0
)

// Canonical header keys, assigned directly into http.Header.
const (
	hdrPolicy       = "Ratelimit-Policy"
	hdrRateLimit    = "Ratelimit"
	hdrLimit        = "X-Ratelimit-Limit"
	hdrRemaining    = "X-Ratelimit-Remaining"
	hdrReset        = "X-Ratelimit-Reset"
	hdrRetryAfter   = "Retry-After"
	hdrCacheControl = "Cache-Control"
	hdrContentType  = "Content-Type"
)

// policyItem formats one RateLimit-Policy list member for a rule of alg.
//
// q is the capacity. For the rate algorithms w is the seconds an empty quota
// takes to refill: the Period for the window algorithms, Capacity*Period/Rate
// for GCRA (so PerMinute(7) says w=60), rounded up to whole seconds and at
// least 1. A Concurrency rule counts requests in flight, not requests per
// window: it is advertised with the draft's quota unit for that,
// qu="concurrent-requests", and no w (its Period is how long a lost slot
// lives, not a window).
func policyItem(name string, l Limit, alg Algorithm) string {
	item := strconv.Quote(name) + ";q=" + strconv.Itoa(l.Capacity())
	if alg == Concurrency {
		return item + `;qu="concurrent-requests"`
	}
	return item + ";w=" + strconv.FormatUint(fieldval.RefillSeconds(l.Capacity(), l.Period, l.Rate), 10)
}

// appendRateLimit appends a RateLimit field value for res under policy
// name, for a rule of alg checked against l.
func appendRateLimit(b []byte, quotedName string, res *Result, alg Algorithm, l Limit) []byte {
	b = append(b, quotedName...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(0, res.Remaining)), 10)
	if alg == Concurrency {
		return b // slots come back when requests finish: no effective window
	}
	b = append(b, ";t="...)
	return strconv.AppendInt(b, delay(res, alg, l), 10)
}

// delay is the t parameter of a rate rule: when allowed, the seconds until
// more than Remaining units are available (nextAfter); when denied, until
// the request would fit: the Retry-After value, at least one second (a
// denial never says "retry now").
func delay(res *Result, alg Algorithm, l Limit) int64 {
	if res.Allowed {
		return fieldval.Seconds(nextAfter(res, alg, l))
	}
	return retryAfter(res)
}

// nextAfter is how long until more than res.Remaining units are available,
// with no other traffic: the store's NextAfter when it reports one, else
// derived from ResetAfter (see fieldval.GCRANext; a window is back to full at its
// end).
func nextAfter(res *Result, alg Algorithm, l Limit) time.Duration {
	switch {
	case res.NextAfter > 0:
		return res.NextAfter
	case alg == GCRA:
		return time.Duration(fieldval.GCRANext(int64(res.ResetAfter), int64(l.Interval()), int64(l.Capacity()), int64(res.Remaining)))
	}
	return res.ResetAfter
}

// retryAfter is the Retry-After value of a denial: at least one second.
func retryAfter(res *Result) int64 { return max(1, fieldval.Seconds(res.RetryAfter)) }

// rateFields are the values of one response's rate-limit fields, those of
// the most restrictive rule.
type rateFields struct {
	style    HeaderStyle
	alg      Algorithm // the reported rule's
	policy   string    // the RateLimit-Policy value
	name     string    // the reported rule's name as a Structured Fields string
	capacity string    // its capacity, preformatted; "" to format limit's
	limit    Limit     // the limit its request was checked against
	now      time.Time // for X-RateLimit-Reset
}

// write sets the rate-limit fields for res and, when denied, Retry-After,
// Cache-Control and (with problem) Content-Type, with one allocation in all.
func (f *rateFields) write(h http.Header, res *Result, problem bool) {
	if f.style == HeadersNone && res.Allowed {
		return
	}
	fs := new(fieldval.Values)
	i := 0
	set := func(key, v string) {
		if i == len(fs.Vals) {
			h[key] = []string{v}
			return
		}
		fs.Vals[i] = v
		h[key] = fs.Vals[i : i+1 : i+1]
		i++
	}
	// The IETF fields are lists: a limiter nested in another (a tighter
	// limit on one route) adds its member to the outer limiter's. With no
	// field set yet (the common case) there is nothing to look up.
	nested := len(h) > 0
	add := func(key, v string) {
		if nested {
			if old := h[key]; len(old) > 0 {
				h[key] = append(old[:len(old):len(old)], v)
				return
			}
		}
		set(key, v)
	}
	if f.style&HeadersIETF != 0 {
		add(hdrPolicy, f.policy)
		add(hdrRateLimit, fs.Format(func(b []byte) []byte { return appendRateLimit(b, f.name, res, f.alg, f.limit) }))
	}
	if f.style&HeadersLegacy != 0 {
		capText := f.capacity
		if capText == "" {
			capText = strconv.Itoa(f.limit.Capacity())
		}
		set(hdrLimit, capText)
		set(hdrRemaining, fs.Format(func(b []byte) []byte { return strconv.AppendInt(b, int64(max(0, res.Remaining)), 10) }))
		// A Concurrency rule's slots come back when requests finish: no
		// reset time on an allowed request, as no t in its RateLimit member.
		if !res.Allowed || f.alg != Concurrency {
			reset := f.now.Add(res.ResetAfter)
			if !res.Allowed {
				reset = f.now.Add(res.RetryAfter)
			}
			unix := (reset.UnixNano() + int64(time.Second) - 1) / int64(time.Second)
			set(hdrReset, fs.Format(func(b []byte) []byte { return strconv.AppendInt(b, unix, 10) }))
		}
	}
	if !res.Allowed {
		set(hdrRetryAfter, fs.Format(func(b []byte) []byte { return strconv.AppendInt(b, retryAfter(res), 10) }))
		set(hdrCacheControl, "no-store")
		if problem {
			set(hdrContentType, "application/problem+json")
		}
	}
}
