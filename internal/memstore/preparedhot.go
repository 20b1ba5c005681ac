package memstore

import "sync/atomic"

// The lock-free path of a prepared batch of one GCRA request over windows
// (a rate stacked on a daily quota, say) whose window keys are their
// shards' hot keys: one key checked by many clients at once, whose batches
// would otherwise queue on the windows' shard locks.
//
// Each window's count is raised by compare-and-swap when the request fits,
// as a lone check of a hot window key raises it (see hotWindow), and the
// GCRA key's state is swapped in last, as takeSwapping swaps it: the batch
// takes effect at that swap. When the swap finds that the rate denies after
// all (another check took the rate in between), the batch lowers the
// counts it raised again, so that nothing is charged for a denied batch and
// no window counts past its limit. Until it does, a check of those windows
// sees the units: it may be denied when a window is within them of its
// limit. A batch that the rate denies only reads the counts.

// takeHot is takeSwapping of a peekable batch whose window keys are all hot
// and counting in their requests' windows, without a lock; tat is the GCRA
// key's state. It reports false, having changed nothing, when a state needs
// its shard's lock: a window key not hot (or retired meanwhile), a window
// named twice, or the GCRA key held or dropped.
func (b *PreparedBatch) takeHot(hashes *[MaxPrepared]uint64, tat *atomic.Int64, results []Result, now int64) bool {
	s, g := b.s, b.g
	var hot [MaxPrepared]*hotWindow
	for j := range b.n {
		if j == g {
			continue
		}
		c := s.windows[s.index(hashes[j])].hot.Load()
		if c == nil || c.h != hashes[j] || !c.counts(&b.reqs[j], now) {
			return false
		}
		for k := range j {
			if hot[k] == c {
				return false // the second sees the first's take: see takeAll
			}
		}
		hot[j] = c
	}
	r := &b.reqs[g]
	old := tat.Load()
	if old == dead {
		return false
	}
	next, d := gcraDecide(old, now, r)
	if !d.allowed {
		if !b.peekHot(&hot, results, now) {
			return false
		}
		results[g] = d.result(now, r)
		return true
	}
	var raised [MaxPrepared]bool
	for j := range b.n {
		if j == g {
			continue
		}
		if !hot[j].takeCounted(&b.reqs[j], now, &results[j]) {
			b.lowerHot(&hot, hashes, &raised)
			return false
		}
		if !results[j].Allowed {
			denial := results[j]
			b.lowerHot(&hot, hashes, &raised)
			if !b.peekHot(&hot, results, now) {
				return false
			}
			results[j] = denial
			results[g] = gcraPeek(old, now, r)
			return true
		}
		raised[j] = b.reqs[j].Cost > 0
	}
	for r.Cost > 0 && !tat.CompareAndSwap(old, next) {
		if old = tat.Load(); old == dead { // held or dropped meanwhile
			b.lowerHot(&hot, hashes, &raised)
			return false
		}
		if next, d = gcraDecide(old, now, r); !d.allowed {
			b.lowerHot(&hot, hashes, &raised)
			if !b.peekHot(&hot, results, now) {
				return false
			}
			break
		}
	}
	results[g] = d.result(now, r)
	return true
}

// gcraPeek is the result of GCRA request r on a key at tat in a batch that
// another request denied: allowed, reported as a take of cost zero (see
// Store.rollback).
func gcraPeek(tat, now int64, r *Request) Result {
	peek := *r
	peek.Cost = 0
	_, d := gcraDecide(tat, now, &peek)
	res := d.result(now, &peek)
	res.Allowed = true
	return res
}

// peekHot fills the results of b's window requests as a denied batch
// reports them (see peek), from their hot states, or reports false when one
// was retired.
func (b *PreparedBatch) peekHot(hot *[MaxPrepared]*hotWindow, results []Result, now int64) bool {
	for j := range b.n {
		if j == b.g {
			continue
		}
		peek := b.reqs[j]
		peek.Cost = 0
		if !hot[j].takeCounted(&peek, now, &results[j]) {
			return false
		}
	}
	return true
}

// lowerHot takes back the units that takeHot raised the windows of b by.
func (b *PreparedBatch) lowerHot(hot *[MaxPrepared]*hotWindow, hashes *[MaxPrepared]uint64, raised *[MaxPrepared]bool) {
	for j := range b.n {
		if raised[j] {
			b.s.windows[b.s.index(hashes[j])].giveBack(hot[j], b.reqs[j].Cost)
		}
	}
}

// counts reports whether c counts in the window of r, a window request of
// cost at most 1: an explicit fixed window (a quota's) that ends where c's
// does, or an epoch-aligned one that c's count is the current window of at
// now (see hotWindow.take).
func (c *hotWindow) counts(r *Request, now int64) bool {
	if r.Force {
		return false
	}
	if r.WinEnd != 0 {
		return r.Alg == FixedWindow && r.WinEnd == c.end
	}
	p := r.Limit.Period
	start := c.end - p
	if r.Alg == SlidingWindow {
		start -= p
	}
	return p == c.period && now >= start && now < start+p
}

// takeCounted decides r on c, which counts in r's window (see counts), as
// applyWindow decides it on the key's state, into res, raising the count
// by r's cost when it fits. It reports false when c was retired. (res is
// written where it lies: a Result passed back is copied at each return.)
func (c *hotWindow) takeCounted(r *Request, now int64, res *Result) bool {
	if r.WinEnd == 0 {
		n, weighted, ok := c.take(r, now)
		if ok {
			*res = windowResult(c.decided(n, weighted, r, now))
		}
		return ok
	}
	n, ok := c.add(r, 0)
	if ok {
		*res = windowResult(fixedDecide(n, max(0, c.end-now), r.Limit, r.Cost, uint64(c.end)))
	}
	return ok
}

// giveBack lowers by cost the count that a take raised on c, the state of
// one of sh's keys: on c, or, when c was retired since, in the table, if
// the key still counts in c's window (or, a sliding window moved on by
// one, counts c's as its previous window's) and no entry was removed
// since c was folded into it. An entry removed (the key deleted, evicted or swept) and
// taken afresh in the same window never counted the units: lowering it
// would admit past the limit, so they are left counted then, a charge
// for a denied batch in that rare race rather than one past the limit.
func (sh *wshard) giveBack(c *hotWindow, cost int64) {
	for {
		v := c.count.Load()
		if v == retired {
			break
		}
		if c.count.CompareAndSwap(v, v-min(v, uint64(cost))) {
			return
		}
	}
	sh.lockFor(c.h) // a newer hot state of the key folded back too
	if w, ok := sh.t.get(c.h); ok && sh.t.removed == c.folded {
		switch {
		case w.Expires == c.end:
			w.A -= uint32(min(int64(w.A), cost))
			set(&sh.shard, c.h, w)
		case c.period != 0 && w.Expires == c.end+c.period:
			// Moved one window on: a sliding window's previous count is
			// c's (a fixed window's B is 0).
			w.B -= uint32(min(int64(w.B), cost))
			set(&sh.shard, c.h, w)
		}
	}
	sh.mu.Unlock()
}

// promoteStacked makes the key h of window request r of a peekable batch
// hot, as a lone check's locked take does (see wshard.promote), h having
// been the shard's last key too and the caller holding the lock: a quota's
// explicit window too, which lone checks decide under the lock, as a state
// that only takeCounted decides.
func (sh *wshard) promoteStacked(h uint64, r *Request) {
	switch {
	case r.WinEnd == 0:
		sh.promote(h, r)
	case r.Alg != FixedWindow || r.Force:
		sh.last = 0
	default:
		if w, ok := sh.t.get(h); ok && w.Expires == r.WinEnd {
			sh.makeHot(h, w, 0) // period 0: no lone take's
		}
	}
}

// promote makes the window keys of b hot (see promoteStacked) after a
// locked take of b, shards[j] the index of request j's shard; the caller
// holds their locks. A key's first locked take in a row only has it
// remembered, here, at the cost of a store: the usual case of a shard
// whose checks go to many keys.
func (b *PreparedBatch) promote(hashes *[MaxPrepared]uint64, shards *[MaxPrepared]int) {
	if !b.peekable {
		return
	}
	for j := range b.n {
		if j == b.g {
			continue
		}
		if sh := &b.s.windows[shards[j]]; sh.last != hashes[j] {
			sh.last = hashes[j]
		} else {
			sh.promoteStacked(hashes[j], &b.reqs[j])
		}
	}
}
