package ratelimitclient

import "strings"

// A policy whose quota unit is "concurrent-requests" (RateLimit-Policy:
// "name";q=10;qu="concurrent-requests") limits the requests a client has in
// flight, not how many it sends in a window: its RateLimit member's r is the
// number of further requests that may be in flight now, and slots come back
// when requests finish, at no time the server can tell. Pacing sends over
// such a member's t, as over a rate quota's, would make a client that never
// has more than one request in flight wait for nothing (earlier servers sent
// the lifetime of a lost slot as t: a minute's wait before every request).
// The Transport therefore does not pace by such members: it leaves
// concurrency to the caller (a 429 on too many requests in flight is still
// waited out, by its Retry-After).

// The parameter naming a policy's quota unit, and the unit of requests in
// flight (draft-ietf-httpapi-ratelimit-headers-11, Section 3.1.2).
const (
	quotaUnitParam     = "qu"
	concurrentRequests = "concurrent-requests"
)

// dropConcurrent removes from o the quotas of the policies that
// policyLines, the RateLimit-Policy field, gives the quota unit
// "concurrent-requests". A malformed policy field drops nothing: it is
// ignored, as parseRateLimit ignores it.
func (o *observation) dropConcurrent(policyLines []string) {
	if o.n == 0 || !mentions(policyLines, concurrentRequests) {
		return // the usual case: no second parse of the policy field
	}
	var names [maxItems]string
	k, ok := concurrentPolicies(policyLines, &names)
	if !ok || k == 0 {
		return
	}
	n := 0
	for _, q := range o.quotas[:o.n] {
		if !contains(names[:k], q.name) {
			o.quotas[n] = q
			n++
		}
	}
	o.n = n
}

// concurrentPolicies stores in names the policies of the List lines whose
// qu parameter is the String "concurrent-requests", and returns how many,
// with ok false when a line is not a valid List of Items.
func concurrentPolicies(lines []string, names *[maxItems]string) (n int, ok bool) {
	for _, line := range lines {
		p := sfParser{s: line}
		p.skipSP()
		for p.i < len(p.s) {
			name, conc, ok := p.unitItem()
			if !ok {
				return 0, false
			}
			if conc && n < len(names) {
				names[n] = name
				n++
			}
			if !p.listSep() {
				return 0, false
			}
		}
	}
	return n, true
}

// unitItem parses an Item with its Parameters and reports its name and
// whether its qu parameter is the String "concurrent-requests".
func (p *sfParser) unitItem() (name string, conc, ok bool) {
	name, _, ok = p.bare()
	if !ok {
		return "", false, false
	}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return "", false, false
		}
		if p.i == len(p.s) || p.s[p.i] != '=' {
			continue // a Boolean true
		}
		p.i++
		isString := p.i < len(p.s) && p.s[p.i] == '"'
		text, _, ok := p.bare()
		if !ok {
			return "", false, false
		}
		if key == quotaUnitParam {
			conc = isString && text == concurrentRequests
		}
	}
	return name, conc, true
}

// mentions reports whether any of lines contains s.
func mentions(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func contains(names []string, name string) bool {
	for _, s := range names {
		if s == name {
			return true
		}
	}
	return false
}
