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
// the window the state holds, for the period that window is aligned to
// (c.period). The window and, for a sliding window, the previous count are
// then known, so the decision is applyWindow's on them (fixedDecide,
// slidingDecide) without finding the window again or building the state to
// store: only the count changes. It reports false otherwise, or when the
// state was retired, for tryTake to decide.
func (c *hotWindow) take(r *Request, now int64) (Result, bool) {
	p := r.Limit.Period
	start := c.end - p // of the window the count is in
	if r.Alg == SlidingWindow {
		start -= p // the state expires a period after its window ends
	}
	if p != c.period || now < start || now >= start+p || !hotEligible(r) {
		return Result{}, false
	}
	for {
		n := c.count.Load()
		if n == retired {
			return Result{}, false
		}
		var res Result
		if r.Alg == SlidingWindow {
			res = slidingDecide(int64(n), int64(c.prev), start, now, r.Limit, r.Cost)
		} else {
			res = fixedDecide(int64(n), c.end-now, r.Limit, r.Cost)
		}
		if !res.Allowed || r.Cost == 0 {
			return res, true
		}
		res.Slot = uint64(start + p) // the window's end
		if c.count.CompareAndSwap(n, uint64(uint32(int64(n)+r.Cost))) {
			return res, true
		}
	}
}
