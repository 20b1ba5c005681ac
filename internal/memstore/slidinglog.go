package memstore

import (
	"math"
	"runtime"
	"sync/atomic"
)

// eventLog is the state of a SlidingLog key: the times of the events that
// may still count, oldest first, in a ring whose capacity is the limit's
// Rate. An event stamped t counts while now < t + Period.
//
// Time never goes back for a key: a request is decided at the later of now,
// the newest stamp and the floor, and its events are stamped then, so the
// ring stays sorted. Only an allowed take drops the events that have left
// the window (as of its own stamp, which every later decision is at or
// after), so a request that read the clock before another that was served
// first (or under a clock stepped back) never finds an event gone that was
// still in the window at the time it is decided at. The floor keeps that
// so when a Return (or a TakeAll rolled back) takes out the newest events:
// it is at or after the newest stamp before the last removal.
//
// A take that fits the ring is decided without the shard's lock, so that
// the checks of one hot key on several cores do not queue on it: the ring's
// head and length are one word, state, with a version, and a take claims
// its events by swapping in the next state (compare-and-swap), then writes
// their stamps and publishes the new version in done. A check reads state,
// waits until done has caught up with it (the previous taker's stamps are
// written), reads the ring and decides; a take then swaps, a denial or a
// read confirms that state has not changed. Either way the decision was
// made on the ring as it stood at one instant. A claimed slot held an
// event that had left the window at the claim's time, which a check that
// read the ring before cannot see through: its swap or its confirmation
// fails, and it decides again.
//
// Whatever else changes a log (a forced take, a Return, TakeAll, a new
// Rate, dropping it) does so under the shard's lock with the log held: the
// held bit of state sends lock-free checks to the lock, and releasing the
// log bumps the version. A log taken out of its table stays held for good.
//
// A log that has been its shard's hot log (the hot bit of state, set once,
// under the lock, before the log is published as hot) also keeps its floor
// at or after its newest stamp: every take raises the floor to its own
// stamp, before it publishes. A check of a hot log then reads the time it
// is decided at, and whether the key is idle, from the header alone, and
// reads the ring only from its oldest event: it does not fetch the line
// that the other core's take has just written only to write it itself.
// Other logs, which only checks under the lock reach, skip that store.
type eventLog struct {
	state  atomic.Uint64 // a logState
	done   atomic.Uint64 // the version whose stamps are all written
	floor  atomic.Int64  // no request is decided before it; see above
	period atomic.Int64  // the Period of the last take; changed only while held
	t      []atomic.Int64
	h      uint64 // the key's hash, for the shard's hot log
	// 64 bytes: one cache line, one allocator size class
}

// weight is what the key counts for against the shard's bound; see
// logWeight.
func (g *eventLog) weight() int { return logWeight(int64(len(g.t))) }

// logState packs a log's version, head (the index of its oldest event),
// length, held bit and hot bit into one word. Rate is at most 10,000, so
// head and length fit in 14 bits each; the version's 34 bits wrap only
// after 1.7*10^10 changes, far more than a check can be delayed by.
type logState uint64

const (
	logHeld     logState = 1
	logHot      logState = 2 // the log has been its shard's hot log
	logNShift            = 2
	logHeadBits          = 14
	logHeadMask          = 1<<logHeadBits - 1
	logVerShift          = logNShift + 2*logHeadBits
	logVerMask           = 1<<(64-logVerShift) - 1
)

func packLog(ver uint64, head, n int) logState {
	return logState((ver&logVerMask)<<logVerShift | uint64(head)<<(logNShift+logHeadBits) | uint64(n)<<logNShift)
}

func (w logState) ver() uint64 { return uint64(w>>logVerShift) & logVerMask }
func (w logState) held() bool  { return w&logHeld != 0 }
func (w logState) hot() bool   { return w&logHot != 0 }
func (w logState) ring(t []atomic.Int64) ring {
	return ring{t: t, head: int(w>>(logNShift+logHeadBits)) & logHeadMask, n: int(w>>logNShift) & logHeadMask}
}

// newLog returns an empty log of capacity rate for the key of hash h,
// held by its caller.
func newLog(h uint64, rate int64) *eventLog {
	g := &eventLog{h: h, t: make([]atomic.Int64, rate)}
	g.state.Store(uint64(logHeld))
	g.floor.Store(math.MinInt64)
	return g
}

// remove drops up to k of the held log's newest events stamped at (every
// stamp when at is math.MinInt64), raising the floor to the newest stamp
// first: the events that the takes up to it forgot stay forgotten.
func (g *eventLog) remove(q *ring, at int64, k int) {
	if q.n > 0 {
		g.floor.Store(max(g.floor.Load(), q.newest()))
	}
	q.remove(at, k)
	g.put(*q)
}

// expiry is when the log's newest event (or its floor) leaves the window:
// the key is then empty. Exact while g is held.
func (g *eventLog) expiry() int64 {
	e := g.floor.Load()
	if q := logState(g.state.Load()).ring(g.t); q.n > 0 {
		e = max(e, q.newest())
	}
	return e + g.period.Load()
}

// published waits until the stamps of state w are written, and reports
// false if w is no longer the state. A check calls it when done is behind
// w.
//
// While w's stamps are unwritten, w stays the state (every change waits
// for them), and done is one version behind it: the taker that made w
// writes its stamps right after its swap, then done, a store that reaches
// this core in well under a microsecond. So the wait spins on done alone
// (a read of a line this core holds until the taker's store takes it
// away), and gives way to the scheduler only after publishSpins reads, when
// the taker has been stopped (preempted, or its thread descheduled). Any
// other value of done means w has been published and since replaced.
func (g *eventLog) published(w logState) bool {
	behind := (w.ver() - 1) & logVerMask
	for spins := 1; ; spins++ {
		switch d := g.done.Load(); {
		case d == w.ver():
			return true
		case d != behind:
			return logState(g.state.Load()) == w
		}
		if spins%publishSpins == 0 {
			runtime.Gosched()
		}
	}
}

// publishSpins is how many reads of done published makes before it yields:
// a read of a line held in the core's cache takes about a nanosecond, and a
// running taker's store reaches it within a few hundred.
const publishSpins = 1024

// hold holds g for its caller, who holds the shard's lock, and returns its
// ring. mine is false when the caller held it already (TakeAll holds a
// log across several requests).
func (g *eventLog) hold() (q ring, mine bool) {
	for {
		w := logState(g.state.Load())
		if w.held() {
			return w.ring(g.t), false
		}
		if g.published(w) && g.state.CompareAndSwap(uint64(w), uint64(w|logHeld)) {
			return w.ring(g.t), true
		}
	}
}

// put records q as the held log's ring.
func (g *eventLog) put(q ring) {
	w := logState(g.state.Load())
	g.state.Store(uint64(packLog(w.ver(), q.head, q.n) | w&logHot | logHeld))
}

// release ends the hold, under a new version.
func (g *eventLog) release() {
	w := logState(g.state.Load())
	q := w.ring(g.t)
	next := packLog(w.ver()+1, q.head, q.n) | w&logHot
	g.done.Store(next.ver())
	g.state.Store(uint64(next))
}

// makeHot sets g's hot bit, raising its floor to its newest stamp, before
// g is published as its shard's hot log. The caller holds the shard's lock
// and g is not held; until it is published as hot, no lock-free check can
// reach g, so neither change needs a new version.
func (g *eventLog) makeHot() {
	w := logState(g.state.Load())
	if w.hot() {
		return
	}
	if q := w.ring(g.t); q.n > 0 {
		g.floor.Store(max(g.floor.Load(), q.newest()))
	}
	g.state.Store(uint64(w | logHot))
}

// try decides r at now without the shard's lock, into res. It reports
// false when the request needs the lock: g is held (or gone from its
// table), or the take is forced, or under another Rate or Period than g's.
func (g *eventLog) try(r *Request, now int64, res *Result) bool {
	if r.Force { // applied whether or not it fits: apply's work
		return false
	}
	p, rate, t0 := r.Limit.Period, r.Limit.Rate, now
	for {
		w := logState(g.state.Load())
		if w.held() {
			return false
		}
		if g.done.Load() != w.ver() && !g.published(w) {
			continue
		}
		q := w.ring(g.t)
		floor := g.floor.Load()
		newest := floor // a hot log's floor is at or after its newest stamp
		if !w.hot() && q.n > 0 {
			newest = q.at(q.n - 1)
		}
		now = max(t0, floor, newest)
		// gone is how many of the oldest events have left the window: all
		// of them on an idle key, else found by a walk from the oldest,
		// which stops at the newest event. On a hot log newest is the
		// floor, which may be past every event: the walk counts to n.
		gone := q.n
		if gone > 0 && newest > now-p {
			gone = 0
			if w.hot() {
				for j := q.head; gone < q.n && g.t[j].Load() <= now-p; gone++ {
					if j++; j == len(g.t) {
						j = 0
					}
				}
			} else {
				for j := q.head; g.t[j].Load() <= now-p; gone++ {
					if j++; j == len(g.t) {
						j = 0
					}
				}
			}
		}
		count := int64(q.n - gone)
		if count+max(r.Cost, 1) > rate || r.Cost == 0 {
			*res = q.deny(gone, count, max(r.Cost, 1), now, p, rate)
			if logState(g.state.Load()) == w {
				return true
			}
			continue
		}
		if int64(len(g.t)) != rate || g.period.Load() != p {
			return false
		}
		oldest := now // the oldest event in the window after the take
		if count > 0 {
			oldest = q.at(gone)
		}
		q.forget(gone)
		at := q.head + q.n // the first slot claimed
		if !g.state.CompareAndSwap(uint64(w), uint64(packLog(w.ver()+1, q.head, q.n+int(r.Cost))|w&logHot)) {
			continue
		}
		for range r.Cost {
			if at >= len(g.t) {
				at -= len(g.t)
			}
			g.t[at].Store(now)
			at++
		}
		if w.hot() {
			g.floor.Store(now)
		}
		g.done.Store((w.ver() + 1) & logVerMask)
		*res = Result{
			Allowed: true, Remaining: rate - count - r.Cost, ResetAfter: p,
			Next: oldest + p - now, Slot: uint64(now),
		}
		return true
	}
}

// ring is a view of a log's events: n of them from index head of t.
type ring struct {
	t       []atomic.Int64
	head, n int
}

// at is the i-th oldest event held, 0 <= i < n.
func (q *ring) at(i int) int64 {
	j := q.head + i
	if j >= len(q.t) {
		j -= len(q.t)
	}
	return q.t[j].Load()
}

func (q *ring) newest() int64 { return q.at(q.n - 1) }

// gone is how many of the oldest events are stamped at or before cutoff:
// those no longer in the window. It walks the ring once, from the head.
func (q *ring) gone(cutoff int64) int {
	if q.n == 0 || q.newest() <= cutoff { // the usual case of an idle key
		return q.n
	}
	k, j := 0, q.head
	for q.t[j].Load() <= cutoff { // stops at the newest event, which is not gone
		k++
		if j++; j == len(q.t) {
			j = 0
		}
	}
	return k
}

// deny is the Result at now of a request of cost need that takes nothing:
// a denial, or a read (cost 0) when it fits. The gone oldest events have
// left the window and count remain.
func (q *ring) deny(gone int, count, need, now, p, rate int64) Result {
	res := q.result(gone, now, p, rate)
	if res.Allowed = count+need <= rate; !res.Allowed {
		res.RetryAfter = q.at(gone+int(count+need-rate-1)) + p - now
	}
	return res
}

// result is the state at now of q, whose gone oldest events have left the
// window: Remaining, ResetAfter (when the newest event leaves) and Next
// (when the oldest in the window does, freeing one more unit).
func (q *ring) result(gone int, now, p, rate int64) Result {
	if q.n == gone {
		return Result{Remaining: rate}
	}
	return Result{
		Remaining:  max(0, rate-int64(q.n-gone)),
		ResetAfter: q.newest() + p - now,
		Next:       q.at(gone) + p - now,
	}
}

// forget forgets the k oldest events, k <= n.
func (q *ring) forget(k int) {
	if q.n -= k; q.n == 0 {
		q.head = 0
		return
	}
	if q.head += k; q.head >= len(q.t) {
		q.head -= len(q.t)
	}
}

// push appends k events stamped at, dropping the oldest if the ring is full
// (only a forced take overfills it).
func (q *ring) push(at int64, k int) {
	if k >= len(q.t) {
		for i := range q.t {
			q.t[i].Store(at)
		}
		q.head, q.n = 0, len(q.t)
		return
	}
	for range k {
		j := q.head + q.n
		if j >= len(q.t) {
			j -= len(q.t)
		}
		q.t[j].Store(at)
		if q.n < len(q.t) {
			q.n++
		} else if q.head++; q.head == len(q.t) {
			q.head = 0
		}
	}
}

// remove drops up to k of the newest events stamped at (every stamp when
// at is math.MinInt64), shifting the newer ones down.
func (q *ring) remove(at int64, k int) {
	hi := q.n // events [lo, hi) are the ones removed
	for hi > 0 && at != math.MinInt64 && q.at(hi-1) > at {
		hi--
	}
	lo := hi
	for lo > 0 && hi-lo < k && (at == math.MinInt64 || q.at(lo-1) == at) {
		lo--
	}
	for i := hi; i < q.n; i++ {
		j := q.head + lo + i - hi
		if j >= len(q.t) {
			j -= len(q.t)
		}
		q.t[j].Store(q.at(i))
	}
	q.n -= hi - lo
}

// logWeight is how many keys a log of capacity rate counts for against the
// bound: its bytes in units of 32, what a window key costs. A timestamp
// takes 8 bytes, which the allocator's size classes round up by at most an
// eighth (so 9 are counted), and the header and table slot under 128.
// TestSlidingLogKeyCostsNoMoreThanItIsCountedFor measures it.
func logWeight(rate int64) int { return int((9*rate + 128 + 31) / 32) }
