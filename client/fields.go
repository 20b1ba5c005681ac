package ratelimitclient

import (
	"net/http"
	"strings"
	"time"
)

// Canonical header keys, read directly from http.Header.
const (
	hdrRateLimit    = "Ratelimit"
	hdrPolicy       = "Ratelimit-Policy"
	hdrOldLimit     = "Ratelimit-Limit"
	hdrOldRemaining = "Ratelimit-Remaining"
	hdrOldReset     = "Ratelimit-Reset"
	hdrXLimit       = "X-Ratelimit-Limit"
	hdrXRemaining   = "X-Ratelimit-Remaining"
	hdrXReset       = "X-Ratelimit-Reset"
	hdrXResource    = "X-Ratelimit-Resource"
	hdrRetryAfter   = "Retry-After"
	hdrAge          = "Age"
	hdrDate         = "Date"
)

// maxCount bounds the quota numbers kept from a response.
const maxCount = 1 << 40

// maxWindow bounds a policy's window. Unlike delays it is not capped by
// MaxDelay, which would make the client faster than the policy allows; the
// spacing it implies is.
const maxWindow = 400 * 24 * time.Hour

// The caps on what a hostile server could ask for, the one place they are
// decided: every number a response gives a quota goes through one of them,
// whether observation.add is given the quota or a template (see
// template.go) reads the number.

// capCount caps a number of requests: a quota, or the quota left.
func capCount(n int64) int64 { return min(n, maxCount) }

// capDelay caps a delay: a reset, or a Retry-After.
func capDelay(d, maxDelay time.Duration) time.Duration { return min(d, maxDelay) }

// capWindow caps a window, or what a reset says of one.
func capWindow(d time.Duration) time.Duration { return min(d, maxWindow) }

// setT sets what a RateLimit item's t parameter of n seconds says of q,
// capped: the time to the reset, and that the window is at least as long.
func (q *quota) setT(n int64, maxDelay time.Duration) {
	d := secs(n)
	q.reset, q.least = capDelay(d, maxDelay), capWindow(d)
	q.exact = q.least
}

// quota is what one response says about one server policy.
type quota struct {
	name      string
	remaining int64
	reset     time.Duration // until the quota is restored
	limit     int64         // the policy's quota; 0 when unknown
	window    time.Duration // the policy's window; 0 when unknown
	least     time.Duration // the window is at least this long, by the reset
	exact     time.Duration // and at least this long if the reset is not rounded up
	slack     time.Duration // how much earlier the reset may be, by the server's clock
	epoch     int64         // the reset as a Unix time in whole seconds, 0 when not one
}

// observation is what one response says about the rate limits.
type observation struct {
	quotas     [maxItems]quota
	n          int
	retryAfter time.Duration
	hasRetry   bool
	ietf       bool // the quotas are the RateLimit and RateLimit-Policy fields'
}

// lines are a response's fields, with the RateLimit and RateLimit-Policy
// lines, which every response is read for, looked up once.
type lines struct {
	h                 http.Header
	rateLimit, policy []string
}

// linesOf looks up the lines of h that every response is read for.
func linesOf(h http.Header) lines {
	if len(h) == 0 {
		return lines{}
	}
	return lines{h: h, rateLimit: h[hdrRateLimit], policy: h[hdrPolicy]}
}

// parseFields fills obs from the rate-limit fields l, received at now.
// Absolute times are read on the server's clock as clock estimates it,
// against the earliest time it may read, so that they are never read
// early. Durations are capped at maxDelay. A response served from a cache
// (one with an Age field) says nothing: its fields may be stale. Malformed
// fields are ignored, one field at a time. fc, when not nil, keeps the
// IETF fields parsed last (see fieldcache.go and template.go). Retry-After
// is read only when retry is set: it means nothing on a response that is
// not a throttle.
func parseFields(l lines, now mono, clock *serverClock, maxDelay time.Duration, fc *fieldCaches, retry bool, obs *observation) {
	h := l.h
	if len(h) == 0 || len(h[hdrAge]) > 0 {
		return
	}
	server := func() serverTime { return clock.read(h, now) }
	if retry {
		if v := h[hdrRetryAfter]; len(v) == 1 {
			obs.retryAfter, obs.hasRetry = parseRetryAfter(v[0], server, maxDelay)
		}
	}
	if v := l.rateLimit; len(v) > 0 {
		if parseRateLimit(v, l.policy, maxDelay, fc, obs) {
			obs.ietf = true
			return
		}
		if q, ok := parseOldDict(v); ok {
			obs.add(q, maxDelay)
			return
		}
	}
	if v := h[hdrOldRemaining]; len(v) > 0 {
		if q, ok := parseTriple(h[hdrOldLimit], v, h[hdrOldReset], serverTime{}, false); ok {
			obs.add(q, maxDelay)
			return
		}
	}
	if v := h[hdrXRemaining]; len(v) > 0 {
		if q, ok := parseTriple(h[hdrXLimit], v, h[hdrXReset], server(), true); ok {
			if r := h[hdrXResource]; len(r) == 1 && len(r[0]) <= 64 {
				q.name = r[0]
			}
			obs.add(q, maxDelay)
		}
	}
}

// add appends q, capping what a hostile server could ask for.
func (o *observation) add(q quota, maxDelay time.Duration) {
	if o.n == len(o.quotas) {
		return
	}
	q.reset = capDelay(q.reset, maxDelay)
	q.window, q.least, q.exact = capWindow(q.window), capWindow(q.least), capWindow(q.exact)
	q.remaining, q.limit = capCount(q.remaining), capCount(q.limit)
	o.quotas[o.n] = q
	o.n++
}

// parseRateLimit reads the current draft's fields:
//
//	RateLimit: "default";r=42;t=17
//	RateLimit-Policy: "default";q=100;w=60
//
// Items without r and t are skipped; a field that is not a valid List is
// ignored as a whole, as is RateLimit-Policy alone.
func parseRateLimit(rlLines, policyLines []string, maxDelay time.Duration, fc *fieldCaches, obs *observation) bool {
	kept := fc != nil && len(rlLines) == 1 && len(policyLines) <= 1
	if kept && fc.rateLimit.read(rlLines[0], policyLines, maxDelay, obs) {
		return true // read from the template: see template.go
	}
	var buf [maxItems]sfItem
	var from [maxItems]int // the item each quota was read from
	n := 0
	for _, line := range rlLines {
		var ok bool
		if n, ok = parseList(line, &buf); !ok {
			obs.n = 0
			return false
		}
		for i, it := range buf[:n] {
			if it.r < 0 || it.t < 0 || obs.n == len(obs.quotas) {
				continue
			}
			from[obs.n] = i
			q := quota{name: it.name, remaining: it.r}
			q.setT(it.t, maxDelay)
			obs.add(q, maxDelay)
		}
	}
	if obs.n == 0 {
		return false
	}
	var pol *listCache
	if fc != nil && len(policyLines) == 1 {
		pol = &fc.policy
	}
	applyPolicy(policyLines, pol, obs)
	if kept {
		fc.rateLimit.keep(rlLines[0], policyLines, buf[:n], &from, obs)
	}
	return true
}

// applyPolicy gives the quotas of obs the quota and window that the
// RateLimit-Policy lines give their policies. A malformed policy field only
// loses the policy details. pol, when not nil, keeps the lines parsed last.
func applyPolicy(lines []string, pol *listCache, obs *observation) {
	var buf [maxItems]sfItem
	for _, line := range lines {
		items, ok := pol.parse(line, &buf)
		if !ok {
			return
		}
		for _, it := range items {
			if it.q <= 0 {
				continue
			}
			for i := range obs.quotas[:obs.n] {
				if q := &obs.quotas[i]; q.name == it.name {
					q.limit = capCount(it.q)
					if it.w > 0 {
						q.window = capWindow(secs(it.w))
					}
				}
			}
		}
	}
}

// parseOldDict reads the dictionary form of earlier drafts:
//
//	RateLimit: limit=100, remaining=42, reset=17
func parseOldDict(lines []string) (quota, bool) {
	q := quota{remaining: absent}
	reset := int64(absent)
	for _, line := range lines {
		p := sfParser{s: line}
		p.skipSP()
		for p.i < len(p.s) {
			key, ok := p.key()
			if !ok || p.i == len(p.s) || p.s[p.i] != '=' {
				return quota{}, false
			}
			p.i++
			_, v, ok := p.bare()
			if !ok {
				return quota{}, false
			}
			switch key {
			case "limit":
				q.limit = max(v, 0)
			case "remaining":
				q.remaining = v
			case "reset":
				reset = v
			}
			for p.i < len(p.s) && p.s[p.i] == ';' { // parameters: skipped
				p.i++
				if _, ok := p.key(); !ok {
					return quota{}, false
				}
				if p.i < len(p.s) && p.s[p.i] == '=' {
					p.i++
					if _, _, ok := p.bare(); !ok {
						return quota{}, false
					}
				}
			}
			p.skipOWS()
			if p.i < len(p.s) {
				if p.s[p.i] != ',' {
					return quota{}, false
				}
				p.i++
				p.skipOWS()
			}
		}
	}
	if q.remaining < 0 || reset < 0 {
		return quota{}, false
	}
	q.reset = secs(reset)
	q.least, q.exact = q.reset, q.reset
	return q, true
}

// parseTriple reads a Limit/Remaining/Reset trio of single-number fields:
// the earlier drafts' RateLimit-* (Reset in seconds) or the de-facto
// X-RateLimit-* (Reset in seconds or, when epoch is set, a Unix time in
// seconds or milliseconds relative to ref, the response's Date: a value of
// at least half of ref's Unix time in that unit, which as a delay would be
// decades, is taken as one).
func parseTriple(limit, remaining, reset []string, st serverTime, epoch bool) (quota, bool) {
	if len(remaining) != 1 || len(reset) != 1 {
		return quota{}, false
	}
	r, ok := parseInt(remaining[0])
	if !ok {
		return quota{}, false
	}
	var d, least, exact, slack time.Duration
	var epochSecs int64
	v, isInt := parseInt(reset[0])
	ref := st.lo
	switch {
	case epoch && isInt && v >= ref.UnixMilli()/2:
		d = max(time.UnixMilli(v).Sub(ref), 0)
		least, slack = max(time.UnixMilli(v).Sub(st.hi), 0), st.hi.Sub(ref)
		exact = least
	case epoch && isInt && v >= ref.Unix()/2:
		// A whole second. When the server rounds its resets up, the window
		// is at least the whole seconds before it; when they fall on a
		// second (a window aligned on the clock), the seconds from the
		// Date to it.
		d = max(time.Unix(v, 0).Sub(ref), 0)
		least, slack = max(time.Unix(v, 0).Sub(st.hi), 0).Truncate(time.Second), st.hi.Sub(ref)
		exact = least
		if !st.date.IsZero() {
			exact = max(time.Unix(v, 0).Sub(st.date), 0)
		}
		epochSecs = v
	default:
		if d, ok = parseSeconds(reset[0]); !ok {
			return quota{}, false
		}
		least, exact = d, d
	}
	q := quota{remaining: r, reset: d, least: least, exact: exact, slack: slack, epoch: epochSecs}
	if len(limit) == 1 {
		// The earlier drafts allowed a policy after the number: "100, 100;w=60".
		l := limit[0]
		if i := strings.IndexAny(l, ",;"); i >= 0 {
			l = l[:i]
		}
		if n, ok := parseInt(strings.TrimSpace(l)); ok && n > 0 {
			q.limit = n
		}
	}
	return q, true
}

// parseRetryAfter reads delay-seconds or an HTTP-date, relative to the
// server's clock.
func parseRetryAfter(v string, server func() serverTime, maxDelay time.Duration) (time.Duration, bool) {
	if n, ok := parseInt(v); ok {
		return capDelay(secs(n), maxDelay), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return capDelay(max(t.Sub(server().lo), 0), maxDelay), true
}

// parseInt parses a non-negative decimal integer of at most 15 digits.
func parseInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		v = v*10 + int64(s[i]-'0')
	}
	return v, true
}

// parseSeconds parses non-negative seconds with an optional fraction of up
// to nine digits, as some legacy APIs send ("1.5").
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	n, ok := parseInt(whole)
	if !ok || len(frac) > 9 {
		return 0, false
	}
	d := secs(n)
	scale := time.Duration(1e8)
	for i := 0; i < len(frac); i++ {
		if !isDigit(frac[i]) {
			return 0, false
		}
		d += time.Duration(frac[i]-'0') * scale
		scale /= 10
	}
	if strings.Contains(s, ".") && len(frac) == 0 {
		return 0, false
	}
	return d, true
}

// secs converts whole seconds to a Duration, saturating.
func secs(n int64) time.Duration {
	const maxSecs = int64(1<<63-1) / int64(time.Second)
	if n > maxSecs {
		return 1<<63 - 1
	}
	return time.Duration(n) * time.Second
}
