package memstore

import (
	"math"
	"sync"
)

// eventLog is the state of a SlidingLog key: the times of the events that
// may still count, oldest first, in a ring whose capacity is the limit's
// Rate. An event stamped t counts while now < t + Period.
//
// Time never goes back for a key: a request is decided at the later of now
// and the newest stamp, and its events are stamped then, so the ring stays
// sorted. Only an allowed take drops the events that have left the window
// (as of its own stamp, which every later decision is at or after), so a
// request that read the clock before another that was served first (or
// under a clock stepped back) never finds an event gone that was still in
// the window at the time it is decided at.
type eventLog struct {
	t       []int64 // the ring; len(t) is the capacity
	head    int     // index of the oldest event
	n       int     // events held
	expires int64   // when the newest event leaves the window: the key is then empty
	weight  int     // what the key counts for against the shard's bound; see logWeight
}

func (g *eventLog) expiry() int64 { return g.expires }

// at is the i-th oldest event held, 0 <= i < n.
func (g *eventLog) at(i int) int64 {
	j := g.head + i
	if j >= len(g.t) {
		j -= len(g.t)
	}
	return g.t[j]
}

func (g *eventLog) newest() int64 { return g.at(g.n - 1) }

// gone is how many of the oldest events are stamped at or before cutoff:
// those no longer in the window. It walks the ring once, from the head.
func (g *eventLog) gone(cutoff int64) int {
	if g.n == 0 || g.newest() <= cutoff { // the usual case of an idle key
		return g.n
	}
	k, j := 0, g.head
	for g.t[j] <= cutoff { // stops at the newest event, which is not gone
		k++
		if j++; j == len(g.t) {
			j = 0
		}
	}
	return k
}

// forget forgets the k oldest events, k <= n.
func (g *eventLog) forget(k int) {
	if g.n -= k; g.n == 0 {
		g.head = 0
		return
	}
	if g.head += k; g.head >= len(g.t) {
		g.head -= len(g.t)
	}
}

// push appends k events stamped at, dropping the oldest if the ring is full
// (only a forced take overfills it).
func (g *eventLog) push(at int64, k int) {
	if k >= len(g.t) {
		for i := range g.t {
			g.t[i] = at
		}
		g.head, g.n = 0, len(g.t)
		return
	}
	if k == 1 && g.n < len(g.t) { // the usual take, written out
		j := g.head + g.n
		if j >= len(g.t) {
			j -= len(g.t)
		}
		g.t[j] = at
		g.n++
		return
	}
	for range k {
		j := g.head + g.n
		if j >= len(g.t) {
			j -= len(g.t)
		}
		g.t[j] = at
		if g.n < len(g.t) {
			g.n++
		} else if g.head++; g.head == len(g.t) {
			g.head = 0
		}
	}
}

// remove drops up to k of the newest events stamped at (every stamp when
// at is math.MinInt64), shifting the newer ones down.
func (g *eventLog) remove(at int64, k int) {
	hi := g.n // events [lo, hi) are the ones removed
	for hi > 0 && at != math.MinInt64 && g.at(hi-1) > at {
		hi--
	}
	lo := hi
	for lo > 0 && hi-lo < k && (at == math.MinInt64 || g.at(lo-1) == at) {
		lo--
	}
	for i := hi; i < g.n; i++ {
		j := g.head + lo + i - hi
		if j >= len(g.t) {
			j -= len(g.t)
		}
		g.t[j] = g.at(i)
	}
	g.n -= hi - lo
}

// logWeight is how many keys a log of capacity rate counts for against the
// bound: its bytes in units of 32, what a window key costs. A timestamp
// takes 8 bytes, which the allocator's size classes round up by at most an
// eighth (so 9 are counted), and the header and table slot under 128.
// TestSlidingLogKeyCostsNoMoreThanItIsCountedFor measures it.
func logWeight(rate int64) int { return int((9*rate + 128 + 31) / 32) }

// logShard is one lock and table of logs, bounded by the weight of the logs
// it holds rather than by their number.
type logShard struct {
	mu    sync.Mutex
	t     table[*eventLog]
	used  int   // the sum of the logs' weights
	swept int64 // the latest expiry of a log dropped as expired; see shard.swept
	_     [16]byte
}

// takeLog decides r, a SlidingLog request, for the key of hash h.
func (s *Store) takeLog(h uint64, r *Request, now int64) Result {
	sh := &s.logs[s.index(h)]
	sh.mu.Lock()
	res := sh.apply(s.perCap, h, r, now)
	sh.mu.Unlock()
	return res
}

// apply decides r at now; the caller holds the lock. A take of cost n fits
// when the events in the window plus n are at most Rate. A denial consumes
// nothing; its RetryAfter is when enough of the oldest events have left.
func (sh *logShard) apply(capacity int, h uint64, r *Request, now int64) Result {
	slot, g := sh.t.lookup(h)
	if slot < 0 {
		now = max(now, sh.swept)
	} else if g.n > 0 {
		now = max(now, g.newest())
	}
	p, rate := r.Limit.Period, r.Limit.Rate
	gone, count := 0, int64(0)
	if g != nil {
		gone = g.gone(now - p)
		count = int64(g.n - gone)
	}
	need := max(r.Cost, 1)
	if !r.Force && count+need > rate || r.Cost == 0 {
		res := logResult(g, gone, now, p, rate)
		if res.Allowed = count+need <= rate; !res.Allowed {
			res.RetryAfter = g.at(gone+int(count+need-rate-1)) + p - now
		}
		return res
	}
	if g != nil {
		g.forget(gone)
	}
	if g == nil || int64(len(g.t)) != rate {
		g = sh.rebuild(capacity, h, slot, g, rate, now)
	}
	g.push(now, int(r.Cost))
	g.expires = now + p
	// logResult(g, 0, now, p, rate), knowing that g holds an event and
	// that the newest is stamped now.
	res := Result{Remaining: max(0, rate-int64(g.n)), ResetAfter: p, Next: g.t[g.head] + p - now}
	res.Allowed = count+r.Cost <= rate
	if !res.Allowed { // a forced take past the limit: when one unit fits again
		res.RetryAfter = g.at(g.n-int(rate)) + p - now
	}
	res.Slot = uint64(now)
	return res
}

// logResult is the state at now of g (nil for none), whose gone oldest
// events have left the window: Remaining, ResetAfter (when the newest
// event leaves) and Next (when the oldest in the window does, freeing one
// more unit).
func logResult(g *eventLog, gone int, now, p, rate int64) Result {
	if g == nil || g.n == gone {
		return Result{Remaining: rate}
	}
	return Result{
		Remaining:  max(0, rate-int64(g.n-gone)),
		ResetAfter: g.newest() + p - now,
		Next:       g.at(gone) + p - now,
	}
}

// rebuild replaces g (nil for a new key, at slot, -1 if absent) with a log
// of capacity rate holding g's events, and stores it: the key is taken out,
// room is made for its new weight, and it goes back in. This is the only
// allocation, when a key first consumes or its limit's Rate changes.
func (sh *logShard) rebuild(capacity int, h uint64, slot int, g *eventLog, rate, now int64) *eventLog {
	next := &eventLog{t: make([]int64, rate), weight: logWeight(rate)}
	if g != nil {
		for i := max(0, g.n-int(rate)); i < g.n; i++ {
			next.t[next.n] = g.at(i)
			next.n++
		}
		sh.t.removeAt(slot)
		sh.used -= g.weight
	}
	sh.makeRoom(capacity, h, next.weight, now)
	sh.t.set(h, next)
	sh.used += next.weight
	return next
}

// makeRoom drops logs until one of weight w fits the shard's bound: the
// expired logs of a sample first, and when it holds none the one that
// would be empty soonest. A log heavier than the whole bound ends up alone
// in its shard.
func (sh *logShard) makeRoom(capacity int, h uint64, w int, now int64) {
	for seed := h; sh.used+w > capacity && sh.t.len() > 0; seed++ {
		var victims [2 * sweepSample]uint64
		n, victim, soonest := 0, uint64(0), int64(math.MaxInt64)
		sh.t.sample(seed, 2*sweepSample, func(k uint64, g *eventLog) bool {
			if e := g.expires; e <= now {
				victims[n] = k
				n++
				sh.swept = max(sh.swept, e)
			} else if e <= soonest {
				victim, soonest = k, e
			}
			return true
		})
		if n == 0 {
			victims[0], n = victim, 1
		}
		for _, k := range victims[:n] {
			sh.drop(k)
		}
	}
}

// drop removes the log of hash h, if any.
func (sh *logShard) drop(h uint64) {
	if i := sh.t.find(h); i >= 0 {
		sh.used -= sh.t.vals[i].weight
		sh.t.removeAt(i)
	}
}

// returnLog gives back r.Cost events of r's key: those its take stamped,
// when r.Slot names one, or else the newest. A refund undoes a take
// whenever it comes; it drops no other event.
func (s *Store) returnLog(h uint64, r *Request) {
	sh := &s.logs[s.index(h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, ok := sh.t.get(h)
	if !ok {
		return
	}
	at := int64(math.MinInt64)
	if r.Slot != 0 {
		at = int64(r.Slot)
	}
	g.remove(at, int(r.Cost))
}

// undoLog takes back the cost events an allowed TakeAll request appended
// (the newest), and the key when the request created it; the caller holds
// the lock.
func (sh *logShard) undo(h uint64, cost int64, existed bool) {
	g, ok := sh.t.get(h)
	if !ok {
		return
	}
	g.remove(math.MinInt64, int(cost))
	if !existed {
		sh.drop(h)
	}
}

func (sh *logShard) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.t.len()
}
