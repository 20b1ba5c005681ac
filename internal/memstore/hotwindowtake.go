package memstore

// take decides r for key h, without the lock when h is the hot key (see
// hotWindow.take and tryTake).
func (sh *wshard) take(capacity int, h uint64, r *Request, now int64) Result {
	if c := sh.hot.Load(); c != nil && c.h == h {
		if res, ok := c.take(r, now); ok {
			return res
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
	res := applyWindow(&sh.shard, capacity, h, r, now)
	sh.promote(h, r)
	sh.mu.Unlock()
	return res
}

// take is tryTake's usual case: a check of the hot key whose time falls in
// the window the state counts in, for the period that window is aligned to
// (c.period). The window is then known, and for a sliding window so is the
// previous count's weight, so the decision is applyWindow's without
// finding the window again or building the state to store: whether the
// request fits, the swap of the count, then the result (see decided). It
// reports false otherwise, or when the state was retired, for tryTake to
// decide.
func (c *hotWindow) take(r *Request, now int64) (Result, bool) {
	p := r.Limit.Period
	start := c.end - p // of the window the count is in
	if r.Alg == SlidingWindow {
		start -= p // the state expires a period after its window ends
	}
	if p != c.period || now < start || now >= start+p || !hotEligible(r) {
		return Result{}, false
	}
	weighted := int64(0)
	if r.Alg == SlidingWindow {
		weighted = slidingWeighted(int64(c.prev), now-start, p)
	}
	for {
		n := c.count.Load()
		if n == retired {
			return Result{}, false
		}
		ok := fits(int64(n)+weighted, r.Cost, r.Limit)
		if !ok || r.Cost == 0 || c.count.CompareAndSwap(n, uint64(uint32(int64(n)+r.Cost))) {
			return c.decided(int64(n), weighted, start, r, now), true
		}
	}
}

// decided is the Result of take's decision on r at now, the count having
// been n before it: built once, at the end, rather than carried through
// take's loop (see takenSlot).
func (c *hotWindow) decided(n, weighted, start int64, r *Request, now int64) Result {
	end := start + r.Limit.Period // of the window
	if r.Alg == SlidingWindow {
		return slidingDecide(n, int64(c.prev), weighted, start, now, r.Limit, r.Cost, uint64(end))
	}
	return fixedDecide(n, end-now, r.Limit, r.Cost, uint64(end))
}
