package memstore

// take decides r for key h, without the lock when h is the hot key (see
// hotWindow.take and tryTake).
func (sh *wshard) take(capacity int, h uint64, r *Request, now int64) Result {
	if c := sh.hot.Load(); c != nil && c.h == h {
		if n, weighted, ok := c.take(r, now); ok {
			return windowResult(c.decided(n, weighted, r, now))
		}
	}
	return sh.takeLocked(capacity, h, r, now)
}

// takeLocked is take when the hot state cannot decide at once: tryTake's
// decision, or the locked one.
func (sh *wshard) takeLocked(capacity int, h uint64, r *Request, now int64) Result {
	if res, ok := sh.tryTake(h, r, now); ok {
		return res
	}
	sh.lockFor(h)
	var res Result
	applyWindow(&sh.shard, capacity, h, r, now, &res)
	sh.promote(h, r)
	sh.mu.Unlock()
	return res
}

// take is tryTake's usual case: a check of the hot key whose time falls in
// the window the state counts in, for the period that window is aligned to
// (c.period). The window is then known, and for a sliding window so is the
// previous count's weight, so the decision is applyWindow's without
// finding the window again or building the state to store: whether the
// request fits, then the swap of the count. It returns the count n before
// the decision and the previous window's weight, which decided turns into
// the decision's fields; or reports false when r's time is not in the
// window, or the state was retired, for tryTake to decide.
func (c *hotWindow) take(r *Request, now int64) (n, weighted int64, ok bool) {
	p := r.Limit.Period
	start := c.end - p // of the window the count is in
	if r.Alg == SlidingWindow {
		start -= p // the state expires a period after its window ends
	}
	if p != c.period || now < start || now >= start+p || !hotEligible(r) {
		return 0, 0, false
	}
	if r.Alg == SlidingWindow {
		weighted = slidingWeighted(int64(c.prev), now-start, p)
	}
	n, ok = c.add(r, weighted)
	return n, weighted, ok
}

// add raises c's count by r's cost when r fits, the count counting weighted
// more (a sliding window's previous count, weighted), and returns the
// count n it found; or reports false when c was retired.
func (c *hotWindow) add(r *Request, weighted int64) (n int64, ok bool) {
	for {
		v := c.count.Load()
		if v == retired {
			return 0, false
		}
		n = int64(v)
		if !fits(n+weighted, r.Cost, r.Limit) || r.Cost == 0 || c.count.CompareAndSwap(v, uint64(uint32(n+r.Cost))) {
			return n, true
		}
	}
}

// decided is the decision that take made on r at now, the count having
// been n before it, as its fields (see windowResult).
func (c *hotWindow) decided(n, weighted int64, r *Request, now int64) (bool, int64, int64, int64, int64, uint64) {
	if p := r.Limit.Period; r.Alg == SlidingWindow {
		start := c.end - 2*p
		return slidingDecide(n, int64(c.prev), weighted, start, now, r.Limit, r.Cost, uint64(start+p))
	}
	return fixedDecide(n, c.end-now, r.Limit, r.Cost, uint64(c.end))
}
