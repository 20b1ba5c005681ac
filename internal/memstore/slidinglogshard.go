package memstore

import (
	"math"
	"sync"
	"sync/atomic"
)

// logShard is one lock and table of logs, bounded by the weight of the logs
// it holds rather than by their number.
//
// The lock guards the table and every change that is not a lock-free take
// (see eventLog). A key whose check found the lock taken is remembered as
// the shard's hot log: its next checks find it there without the lock and
// take lock-free, so that one key served on several cores at once does
// not queue them on the lock. Checks of other keys take the lock as before.
type logShard struct {
	mu    sync.Mutex
	hot   atomic.Pointer[eventLog] // the log of the key last found contended
	t     table[*eventLog]
	used  int   // the sum of the logs' weights
	swept int64 // the latest expiry of a log dropped as expired; see shard.swept
	// capacity is the shard's share of the bound, at least maxLogUnits
	// unless the store's bound is smaller (see logShardsFor).
	capacity int
	_        [16]byte // two whole cache lines
}

// maxLogUnits is the weight of the heaviest log, of stores.MaxSlidingLog
// events: 80,000 bytes of ring, which the allocator rounds to 10 pages of
// 8 KiB (TestMaxLogUnitsIsTheHeaviestLogsWeight checks it).
const maxLogUnits = (64 + 10*8192 + 64 + 31) / 32

// logShardsFor is how many shards the sliding logs of a store of n shards
// bounded to maxKeys spread over: n halved until each shard's share of the
// bound holds the heaviest log, down to one. A log heavier than its
// shard's share is kept alone there, over the share: in every shard, that
// would add up to 2.5 times the bound (64 shards of 1,024 keys).
func logShardsFor(n, maxKeys int) int {
	for n > 1 && maxKeys/n < maxLogUnits {
		n >>= 1
	}
	return n
}

// takeLog decides r, a SlidingLog request, for the key of hash h, into
// *res: on the shard's hot log without the lock when it is h's, otherwise
// under the lock, lock-free still (see eventLog) unless the request needs
// more.
func (s *Store) takeLog(h uint64, r *Request, now int64, res *Result) {
	sh := &s.logs[s.logIndex(h)]
	if g := sh.hot.Load(); g != nil && g.h == h && g.try(r, now, res, false) {
		return
	}
	contended := !sh.mu.TryLock()
	if contended {
		sh.mu.Lock()
	}
	if i := sh.t.find(h); i >= 0 {
		g := sh.t.vals[i]
		if contended {
			sh.promote(g)
		}
		if g.try(r, now, res, true) {
			sh.mu.Unlock()
			return
		}
	}
	*res = sh.apply(sh.capacity, h, r, now, false)
	sh.mu.Unlock()
}

// apply decides r at now under the lock, with the key's log held. A take
// of cost n fits when the events in the window plus n are at most Rate. A
// denial consumes nothing; its RetryAfter is when enough of the oldest
// events have left. With keep set (TakeAll) the log stays held, to be
// released by releaseLog.
func (sh *logShard) apply(capacity int, h uint64, r *Request, now int64, keep bool) Result {
	slot, g := sh.t.lookup(h)
	var q ring
	if slot < 0 {
		now = max(now, sh.swept)
	} else if q, _ = g.hold(); q.n > 0 {
		now = max(now, q.newest(), g.floor.Load())
	} else {
		now = max(now, g.floor.Load())
	}
	p, rate := r.Limit.Period, r.Limit.Rate
	gone := q.gone(now - p)
	count := int64(q.n - gone)
	need := max(r.Cost, 1)
	if !r.Force && count+need > rate || r.Cost == 0 {
		var res Result
		q.deny(&res, gone, count, need, now, p, rate)
		if g != nil && !keep {
			g.release()
		}
		return res
	}
	q.forget(gone)
	if g == nil || int64(len(g.t)) != rate {
		g, q = sh.rebuild(capacity, h, slot, g, q, rate, now)
	}
	q.push(now, int(r.Cost))
	if logState(g.state.Load()).hot() {
		g.floor.Store(now) // at or after the newest stamp: see eventLog
	}
	g.period.Store(p)
	g.put(q)
	// q.result(&res, 0, now, p, rate), knowing that q holds an event and that
	// the newest is stamped now.
	res := Result{Remaining: max(0, rate-int64(q.n)), ResetAfter: p, Next: q.at(0) + p - now}
	res.Allowed = count+r.Cost <= rate
	if !res.Allowed { // a forced take past the limit: when one unit fits again
		res.RetryAfter = q.at(q.n-int(rate)) + p - now
	}
	res.Slot = uint64(now)
	if !keep {
		g.release()
	}
	return res
}

// rebuild replaces old (nil for a new key, at slot, -1 if absent), whose
// events are q, with a log of capacity rate holding them, and stores it,
// held: the key is taken out, room is made for its new weight, and it goes
// back in. old stays held for good. This is the only allocation, when a
// key first consumes or its limit's Rate changes.
func (sh *logShard) rebuild(capacity int, h uint64, slot int, old *eventLog, q ring, rate, now int64) (*eventLog, ring) {
	g := newLog(h, rate)
	next := ring{t: g.t}
	if old != nil {
		g.floor.Store(old.floor.Load())
		for i := max(0, q.n-int(rate)); i < q.n; i++ {
			next.t[next.n].Store(q.at(i))
			next.n++
		}
		sh.remove(slot)
		sh.used -= old.weight()
		sh.forgetHot(old)
	}
	sh.makeRoom(capacity, h, g.weight(), now)
	sh.t.set(h, g)
	sh.used += g.weight()
	return g, next
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
			if e := g.expiry(); e <= now {
				victims[n] = k
				n++
			} else if e <= soonest {
				victim, soonest = k, e
			}
			return true
		})
		if n == 0 {
			sh.drop(victim)
			continue
		}
		for _, k := range victims[:n] {
			sh.dropExpired(k, now)
		}
	}
}

// dropExpired drops the log of hash h if it has expired by now: held, so
// that no lock-free take lands in it meanwhile. A log that a take revived
// since it was sampled is kept.
func (sh *logShard) dropExpired(h uint64, now int64) {
	i := sh.t.find(h)
	if i < 0 {
		return
	}
	g := sh.t.vals[i]
	_, mine := g.hold()
	if e := g.expiry(); e > now {
		if mine {
			g.release()
		}
		return
	}
	sh.swept = max(sh.swept, g.expiry())
	sh.used -= g.weight()
	sh.remove(i)
	sh.forgetHot(g)
}

// drop removes the log of hash h, if any, which stays held for good.
func (sh *logShard) drop(h uint64) {
	if i := sh.t.find(h); i >= 0 {
		g := sh.t.vals[i]
		g.hold()
		sh.used -= g.weight()
		sh.remove(i)
		sh.forgetHot(g)
	}
}

// remove takes the log at slot i out of the table, and halves the table
// once it is less than a quarter full: a key counts 64 bytes for its table
// slot (see logUnits), four slots of 16, which a table that many light
// logs made large would otherwise exceed for the few heavy logs that
// replace them.
func (sh *logShard) remove(i int) {
	sh.t.removeAt(i)
	if n := len(sh.t.keys); n > 16 && 4*sh.t.n < n {
		sh.t.grow(n / 2)
	}
}

// promote remembers g, a log in the table, as the shard's hot log; the
// caller holds the lock. The log it replaces is made cold: only checks
// under the lock reach it now, which take it without marking slots
// pending.
func (sh *logShard) promote(g *eventLog) {
	if old := sh.hot.Load(); old != nil && old != g {
		old.makeCold()
	}
	g.makeHot()
	sh.hot.Store(g)
}

// forgetHot stops remembering g, taken out of the table, as the hot log.
func (sh *logShard) forgetHot(g *eventLog) {
	if sh.hot.Load() == g {
		sh.hot.Store(nil)
	}
}

// returnLog gives back r.Cost events of r's key: those its take stamped,
// when r.Slot names one, or else the newest. A refund undoes a take
// whenever it comes; it drops no other event.
func (s *Store) returnLog(h uint64, r *Request) {
	sh := &s.logs[s.logIndex(h)]
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
	q, _ := g.hold()
	g.remove(&q, at, int(r.Cost))
	g.release()
}

// undo takes back the cost events an allowed TakeAll request appended
// (the newest), and the key when the request created it; the caller holds
// the lock, and the log is held since the request (see apply's keep).
func (sh *logShard) undo(h uint64, cost int64, existed bool) {
	g, ok := sh.t.get(h)
	if !ok {
		return
	}
	q, _ := g.hold()
	g.remove(&q, math.MinInt64, int(cost))
	if !existed {
		sh.drop(h)
	}
}

// releaseLog ends TakeAll's hold on the log of hash h, if any is held.
func (sh *logShard) releaseLog(h uint64) {
	if g, ok := sh.t.get(h); ok && logState(g.state.Load()).held() {
		g.release()
	}
}

func (sh *logShard) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.t.len()
}
