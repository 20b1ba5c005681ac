package memstore

import "math"

// Settle applies to key, at now, the settlement of an admission that p's
// Take decided: a forced take of delta units (delta > 0) or a return of
// -delta (delta < 0), aimed at slot (the admission's Result.Slot, or 0 for
// the state as it is at now). It changes the state as Store.Take with
// Force, or Store.Return, of p's request with that cost and slot would,
// without validating or hashing the rule again.
func (p *Prepared) Settle(key string, slot uint64, delta, now int64) {
	if delta == 0 {
		return
	}
	s := p.s
	h := s.keyHash(key, p.mix)
	r := p.req
	r.Key, r.Slot, r.MaxDelay = key, slot, 0
	if delta > 0 {
		r.Cost, r.Force = delta, true
		s.takeHashed(&r, h, now)
		return
	}
	r.Cost = -delta
	s.returnHashed(&r, h, now)
}

// settleWindow applies delta units of r to w at now: a forced take (delta
// > 0, a settlement of units already spent) or a return (delta < 0), to the
// window r.Slot names (its end), or with r.Slot zero to the window a take at
// now counts in. Units for a window that no longer counts (a fixed window
// that ended, a sliding window before the previous one) change nothing;
// counts stay within [0, 2^32-1]. The result reports the target window's
// count after the change (for a forced take, Allowed when it is within the
// limit).
func settleWindow(w window, now int64, r *Request, delta int64) (window, Result) {
	if r.Alg == SlidingWindow {
		return settleSliding(w, now, r.Limit, r.Slot, delta)
	}
	return settleFixed(w, now, r, delta)
}

func settleFixed(w window, now int64, r *Request, delta int64) (window, Result) {
	l := r.Limit
	end := int64(r.Slot)
	if end == 0 {
		end = r.WinEnd
		if end == 0 {
			end = now - mod(now, l.Period) + l.Period
		}
		if w.A > 0 && w.Expires > end { // windows never go back
			end = w.Expires
		}
	} else if now >= end || w.A > 0 && w.Expires > end {
		return w, Result{Allowed: true, Remaining: fixedRemaining(w, now, l)}
	}
	count := int64(0)
	if w.Expires == end {
		count = int64(w.A)
	}
	count = clampCount(count + delta)
	res := Result{Allowed: count <= l.Rate, Remaining: max(0, l.Rate-count), ResetAfter: max(0, end-now)}
	if !res.Allowed {
		res.RetryAfter = res.ResetAfter
	}
	return window{Expires: end, A: uint32(count)}, res
}

// fixedRemaining is what a window the settlement did not touch has left.
func fixedRemaining(w window, now int64, l Limit) int64 {
	if w.Expires > now {
		return max(0, l.Rate-int64(w.A))
	}
	return l.Rate
}

func settleSliding(w window, now int64, l Limit, slot uint64, delta int64) (window, Result) {
	p := l.Period
	now = slidingNow(w, now, p)
	start := now - mod(now, p)
	end := int64(slot)
	if end == 0 {
		end = start + p
	}
	if end < start || end > start+p { // before the previous window, or not yet
		_, res := slidingWindow(w, now, l, 0)
		res.Allowed = true
		return w, res
	}
	cur, prev := int64(0), int64(0) // the counts of [start, start+p) and the one before
	switch w.Expires - 2*p {
	case start:
		cur, prev = int64(w.A), int64(w.B)
	case start - p:
		prev = int64(w.A)
	}
	if end == start+p {
		cur = clampCount(cur + delta)
	} else {
		prev = clampCount(prev + delta)
	}
	out := window{Expires: start + 2*p, A: uint32(cur), B: uint32(prev)}
	weighted := mulDivCeil(prev, p-(now-start), p)
	res := Result{
		Allowed:    cur+weighted <= l.Rate,
		Remaining:  max(0, l.Rate-cur-weighted),
		ResetAfter: slidingResetAfter(cur, prev, start, now, p),
	}
	if !res.Allowed {
		res.RetryAfter = slidingRetryAfter(cur, prev, 0, start, now, l)
	}
	return out, res
}

func clampCount(n int64) int64 { return min(max(n, 0), math.MaxUint32) }
