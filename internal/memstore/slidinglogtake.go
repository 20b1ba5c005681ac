package memstore

import "runtime"

// try decides r at now without the shard's lock, into res; locked says
// whether the caller holds it. It reports false when the request needs the
// lock: g is held (or gone from its table), or the caller does not hold
// the lock and g is no longer hot, or the take is forced, or under another
// Rate or Period than g's, or of a cost larger than a hot log can leave
// pending.
func (g *eventLog) try(r *Request, now int64, res *Result, locked bool) bool {
	if r.Force { // applied whether or not it fits: apply's work
		return false
	}
	p, rate, t0 := r.Limit.Period, r.Limit.Rate, now
	for {
		w := logState(g.state.Load())
		if w.held() || !locked && !w.hot() {
			return false
		}
		head, n := w.head(), w.len() // not a ring value, copied: see ring.deny
		floor := g.floor.Load()
		newest := floor // a hot log's floor is at or after its newest stamp
		if !w.hot() && n > 0 {
			newest = stampAt(g.t, head, n-1) // no slot of a log that is not hot is pending
		}
		now = max(t0, floor, newest)
		// written is how many of the oldest events have their stamps
		// written: all but those from the oldest pending one on.
		written := n - w.depth()
		// gone is how many of the oldest events have left the window: all
		// of them on an idle key, else found by a walk from the oldest.
		// On a hot log newest is the floor, which may be past every event,
		// so the walk is bounded, by the first pending slot too: its stamp
		// cannot be read.
		gone := n
		if gone > 0 && newest > now-p {
			gone = 0
			for j := head; gone < written && g.t[j].Load() <= now-p; gone++ {
				if j++; j == len(g.t) {
					j = 0
				}
			}
		}
		if written < n && gone >= written {
			// Every written event has left the window: whether the
			// pending ones have too, and the stamp a denial's fields would
			// read, are their takers' to write; and a slot is not freed
			// before its taker has written it.
			g.await(w)
			continue
		}
		count := int64(n - gone)
		if count+max(r.Cost, 1) > rate || r.Cost == 0 {
			if written < n { // the fields read the newest events
				g.await(w)
			} else if g.deny(w, res, gone, count, max(r.Cost, 1), now, p, rate) {
				return true
			}
			continue
		}
		if int64(len(g.t)) != rate || g.period.Load() != p || w.hot() && r.Cost > logPendBits {
			return false
		}
		oldest := now // the oldest event in the window after the take
		if count > 0 {
			oldest = stampAt(g.t, head, gone)
		}
		head, n = forgotten(head, n, gone, len(g.t)) // the first slot claimed follows the rest
		at := head + n
		if at >= len(g.t) {
			at -= len(g.t)
		}
		next := packLog(w.ver()+uint64(r.Cost), head, n+int(r.Cost)) | w&logHot
		if !w.hot() {
			// Checked under the shard's lock only, by one taker at a
			// time: the stamps go into the free slots, then the state.
			g.stamp(at, int(r.Cost), now)
			g.state.Store(uint64(next))
		} else if !g.claim(w, next, at, int(r.Cost), floor, now) {
			continue
		}
		// Field by field, as ring.deny.
		res.Allowed, res.Remaining, res.RetryAfter = true, rate-count-r.Cost, 0
		res.ResetAfter, res.Delay, res.Slot, res.Next = p, 0, uint64(now), oldest+p-now
		return true
	}
}

// deny writes into res the Result of a request of cost need that takes
// nothing, decided at now on w, whose events are all written and whose
// gone oldest have left the window, and reports whether w still stands.
func (g *eventLog) deny(w logState, res *Result, gone int, count, need, now, p, rate int64) bool {
	var q ring // field by field: see ring.deny
	q.t, q.head, q.n = g.t, w.head(), w.len()
	q.deny(res, gone, count, need, now, p, rate)
	return logState(g.state.Load()) == w
}

// claim swaps next, the state after a take of k events stamped now from
// slot at, in for w on the hot log g, and reports whether it did: false
// when the state has changed since w (or the take four events before is
// still pending), and the request must be decided again.
//
// The floor is raised to now before the swap, so that a check that finds
// the swap decides no earlier than the stamps it cannot yet read; the swap
// sets the pending bits of the k events, and publish writes them. The
// floor stays raised if the swap fails: now is a time the request read (or
// the floor), and it is decided again no earlier.
func (g *eventLog) claim(w, next logState, at, k int, floor, now int64) bool {
	mine := pendingBits(w.ver(), k)
	if w&mine != 0 { // a take of four events before is still pending
		g.await(w)
		return false
	}
	g.raiseFloor(floor, now)
	for !g.state.CompareAndSwap(uint64(w), uint64(next|w&logPending|mine)) {
		// A take that was pending in w may have written its stamps since:
		// the ring is as it was, and the decision stands (it counted those
		// events, which are newer than the oldest it kept).
		cur := logState(g.state.Load())
		if cur&^logPending != w&^logPending {
			return false
		}
		w = cur
	}
	g.publish(at, k, now, mine)
	return true
}

// stamp writes now into the k slots from index at.
func (g *eventLog) stamp(at, k int, now int64) {
	for range k {
		g.t[at].Store(now)
		if at++; at == len(g.t) {
			at = 0
		}
	}
}

// raiseFloor raises g's floor, last read as floor, to now if it is below.
func (g *eventLog) raiseFloor(floor, now int64) {
	for f := floor; f < now && !g.floor.CompareAndSwap(f, now); f = g.floor.Load() {
	}
}

// publish writes the stamps of the k pending slots from index at, which a
// swap of this goroutine claimed, and clears their pending bits, mine.
// Bits name events, not places, so the taker clears its own however many
// events have been claimed since.
func (g *eventLog) publish(at, k int, now int64, mine logState) {
	g.stamp(at, k, now)
	g.state.And(^uint64(mine))
}

// await waits until g's state is no longer w: a check calls it when it
// needs the stamp of a pending slot of w, which its taker writes right
// after its swap. It gives way to the scheduler only after publishSpins
// reads, when the taker has been stopped.
func (g *eventLog) await(w logState) {
	for spins := 1; logState(g.state.Load()) == w; spins++ {
		if spins%publishSpins == 0 {
			runtime.Gosched()
		}
	}
}
