package ratelimitclient

import (
	"net/http"
	"time"
)

// update applies what resp, the response to the send numbered seq made at
// sent (zero when it was not read: outside the adaptive mode), says
// about the rate limits of partition p, and reports whether it is a
// throttle: a 429, or a 503 or 403 with Retry-After (GitHub answers its
// secondary rate limits with 403 and Retry-After).
func (t *Transport) update(p *partition, resp *http.Response, seq uint64, sent mono, attempt int) bool {
	status := resp.StatusCode
	mayThrottle := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == http.StatusForbidden
	if !mayThrottle && !p.gated.Load() && !mayHaveFields(resp.Header) {
		return false
	}
	l := linesOf(resp.Header) // looked up once, for every step below
	now := t.now()
	if !mayThrottle && p.repeats(l.rateLimit, l.policy, now) {
		return false // the fields of the response applied last: see repeated.go
	}
	var obs observation
	parseFields(l, now, &p.clock, t.maxDelay, &p.fields, mayThrottle, &obs)
	if !p.fields.rateOnly(l.policy) {
		obs.dropConcurrent(l.policy) // requests in flight are no rate: see concurrency.go
	}
	throttled := status == http.StatusTooManyRequests ||
		(status == http.StatusServiceUnavailable || status == http.StatusForbidden) && obs.hasRetry
	if obs.n == 0 && !throttled && !(t.Adaptive && p.local != nil) {
		return false
	}
	var block time.Duration
	var until mono // the throttle's end, when it has a Retry-After
	if throttled && obs.hasRetry {
		until = now.add(obs.retryAfter)
	}
	p.mu.Lock()
	count := p.count.Load()
	applied, shorter := obs.n > 0, false // shorter: a policy's window or reset is sooner
	for i := range obs.quotas[:obs.n] {
		q := &obs.quotas[i]
		pol := find(&p.policies, q.name)
		if pol == nil {
			applied = false
			continue
		}
		ok, sooner := pol.apply(q, seq, count, now, t.maxDelay, until)
		if !ok {
			applied = false
			continue
		}
		shorter = shorter || sooner
		if p.log == nil && pol.logged() { // no policy is logOff before there is a log
			p.log = newSendLog(now, count)
		}
		pol.checkLog(p.log, seq, q.remaining)
	}
	p.note(l.rateLimit, l.policy, &obs, applied, mayThrottle)
	if throttled {
		// Retry-After takes precedence; without it, back off exponentially.
		block = obs.retryAfter
		if !obs.hasRetry {
			block = min(time.Second<<min(attempt, 10), t.maxDelay)
		}
		p.blocked = max(p.blocked, now.add(block))
	}
	if shorter && len(p.waiters) > 0 {
		p.replan(now) // sends waiting on a slower picture: see replan.go
	}
	t.adapt(p, resp.Header, throttled, block, sent, now)
	if !p.gated.Load() {
		p.gated.Store(true) // a store on every response would contend with its loads
	}
	p.mu.Unlock()
	if throttled {
		t.observe(Event{Kind: Throttled, Partition: p.name, Wait: block, Attempt: attempt, Status: status})
	}
	return throttled
}

// mayHaveFields reports whether h may carry rate-limit fields, cheaply.
func mayHaveFields(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	return len(h[hdrRateLimit]) > 0 || len(h[hdrOldRemaining]) > 0 ||
		len(h[hdrXRemaining]) > 0 || len(h[hdrRetryAfter]) > 0
}
