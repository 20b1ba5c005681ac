package memstore

import (
	"math"
	"runtime"
	"slices"
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
// its events by swapping in the next state (compare-and-swap). A check
// reads state, reads the ring and decides; a take then swaps, a denial or a
// read confirms that state has not changed. Either way the decision was
// made on the ring as it stood at one instant. A claimed slot held an
// event that had left the window at the claim's time, which a check that
// read the ring before cannot see through: its swap or its confirmation
// fails, and it decides again.
//
// A log checked only under the lock (one that is not hot, below) has one
// taker at a time: it writes its stamps in the free slots first and then
// stores the next state, so a claimed slot is never seen unwritten. A hot
// log's takers race, and a claim cannot write its stamps before its swap
// (a rival holding the same state would write the same slots), so its
// slots are pending from the swap until it has written them: state holds a
// pending bit for each of the last four events, set by the swap and cleared
// by the taker once its stamps are written (see slidinglogtake.go). A check
// never waits for them: it decides at or after the floor, which the taker
// raised to its stamp before its swap, and reads only the slots older than
// the oldest pending one; only when it needs one that is pending (every
// older event has left the window, or a denial's fields name it) does it
// wait for it.
//
// Whatever else changes a log (a forced take, a Return, TakeAll, a new
// Rate, dropping it) does so under the shard's lock with the log held: the
// held bit of state sends lock-free checks to the lock, hold waits for the
// pending slots to be written, and releasing the log bumps the version. A
// log taken out of its table stays held for good.
//
// The shard's hot log (the hot bit of state, set under the lock before the
// log is published as hot, cleared under the lock when another log
// replaces it) also keeps its floor at or after its newest stamp: every
// take raises the floor to its own stamp, before it swaps. A check of a
// hot log then reads the time it is decided at, and whether the key is
// idle, from the header alone, and reads the ring only from its oldest
// event: it does not fetch the line that the other core's take has just
// written only to write it itself. Other logs, which only checks under the
// lock reach, skip that store.
type eventLog struct {
	state  atomic.Uint64 // a logState
	floor  atomic.Int64  // no request is decided before it; see above
	period atomic.Int64  // the Period of the last take; changed only while held
	t      []atomic.Int64
	h      uint64  // the key's hash, for the shard's hot log
	_      [8]byte // 64 bytes: one cache line, one allocator size class
}

// weight is what the key counts for against the shard's bound: see
// logUnits. The ring's capacity is what the allocator gave it (newLog).
func (g *eventLog) weight() int { return logUnits(cap(g.t)) }

// logState packs a log's version, pending bits, head (the index of its
// oldest event), length, held bit and hot bit into one word. Rate is at
// most 10,000, so head and length fit in 14 bits each. A take of k events
// adds k to the version (a release adds 1), so that while a slot is
// pending the version numbers the events: the newest is the version, the
// one before it the version less 1, and so on; pending bit v mod 4 stands
// for event v (see depth). The version's 30 bits wrap only after 10^9
// events, far more than a check can be delayed by.
type logState uint64

const (
	logHeld      logState = 1
	logHot       logState = 2 // the log has been its shard's hot log
	logNShift             = 2
	logHeadBits           = 14
	logHeadMask           = 1<<logHeadBits - 1
	logPendShift          = logNShift + 2*logHeadBits
	logPendBits           = 4 // how many events may be pending at once
	logPendMask           = 1<<logPendBits - 1
	logPending            = logPendMask << logPendShift // the pending bits in place
	logVerShift           = logPendShift + logPendBits
	logVerMask            = 1<<(64-logVerShift) - 1
)

func packLog(ver uint64, head, n int) logState {
	return logState((ver&logVerMask)<<logVerShift | uint64(head)<<(logNShift+logHeadBits) | uint64(n)<<logNShift)
}

func (w logState) ver() uint64 { return uint64(w>>logVerShift) & logVerMask }
func (w logState) held() bool  { return w&logHeld != 0 }

// pending is the pending bits: bit v mod 4 is set while event v (see
// logState) is claimed by a lock-free take that has not yet written its
// stamp.
func (w logState) pending() uint64 { return uint64(w>>logPendShift) & logPendMask }

// depth is how many of the newest events are not all written: 0 when none
// is pending, else 1 + the distance from the newest of the oldest pending.
func (w logState) depth() int {
	m := w.pending()
	if m == 0 {
		return 0
	}
	v := w.ver()
	d := logPendBits - 1
	for m>>((v-uint64(d))%logPendBits)&1 == 0 {
		d--
	}
	return d + 1
}

// pendingBits is the pending bits of the k events after version v, k at
// most logPendBits, in place in a logState.
func pendingBits(v uint64, k int) logState {
	m := uint64(1<<k-1) << ((v + 1) % logPendBits)
	return logState((m|m>>logPendBits)&logPendMask) << logPendShift
}
func (w logState) hot() bool { return w&logHot != 0 }
func (w logState) head() int { return int(w>>(logNShift+logHeadBits)) & logHeadMask }
func (w logState) len() int  { return int(w>>logNShift) & logHeadMask }
func (w logState) ring(t []atomic.Int64) ring {
	return ring{t: t, head: w.head(), n: w.len()}
}

// newLog returns an empty log of capacity rate for the key of hash h,
// held by its caller.
//
// The ring's capacity is what the allocator made of it (slices.Grow
// reports it), which the key counts for (see weight).
func newLog(h uint64, rate int64) *eventLog {
	g := &eventLog{h: h, t: slices.Grow([]atomic.Int64(nil), int(rate))[:rate]}
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

// hold holds g for its caller, who holds the shard's lock, and returns its
// ring, once every pending slot is written. mine is false when the caller
// held it already (TakeAll holds a log across several requests).
//
// The held bit stops new lock-free claims at once; those already swapped
// in write their stamps right after their swap, so the wait is short
// unless a taker has been stopped (preempted, or its thread descheduled),
// when it gives way to the scheduler.
func (g *eventLog) hold() (q ring, mine bool) {
	w := logState(g.state.Load())
	for !w.held() {
		if g.state.CompareAndSwap(uint64(w), uint64(w|logHeld)) {
			mine = true
			break
		}
		w = logState(g.state.Load())
	}
	for spins := 1; w.pending() != 0; spins++ {
		if spins%publishSpins == 0 {
			runtime.Gosched()
		}
		w = logState(g.state.Load())
	}
	return w.ring(g.t), mine
}

// publishSpins is how many reads of state a wait for a pending slot makes
// before it yields: a read of a line held in the core's cache takes about a
// nanosecond, and a running taker's store reaches it within a few hundred.
const publishSpins = 1024

// put records q as the held log's ring.
func (g *eventLog) put(q ring) {
	w := logState(g.state.Load())
	g.state.Store(uint64(packLog(w.ver(), q.head, q.n) | w&logHot | logHeld))
}

// release ends the hold, under a new version.
func (g *eventLog) release() {
	w := logState(g.state.Load())
	q := w.ring(g.t)
	g.state.Store(uint64(packLog(w.ver()+1, q.head, q.n) | w&logHot))
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

// makeCold clears g's hot bit when another log replaces it as its shard's
// hot log. The caller holds the shard's lock; a check that loaded g as the
// hot log before may still be deciding on it without the lock, and is sent
// to the lock once the bit is clear (see try), so the bit is cleared once
// no slot is pending, under a new version, which fails such a check's swap.
func (g *eventLog) makeCold() {
	for spins := 1; ; spins++ {
		w := logState(g.state.Load())
		if !w.hot() || w.held() {
			return
		}
		q := w.ring(g.t)
		if w.pending() == 0 && g.state.CompareAndSwap(uint64(w), uint64(packLog(w.ver()+1, q.head, q.n))) {
			return
		}
		if spins%publishSpins == 0 {
			runtime.Gosched()
		}
	}
}

// stampAt is the stamp of the i-th oldest of the events of ring t from
// slot head: ring.at, for a caller that holds head without a ring (see
// ring.deny).
func stampAt(t []atomic.Int64, head, i int) int64 {
	if head += i; head >= len(t) {
		head -= len(t)
	}
	return t[head].Load()
}

// forgotten is the head and length of n events from slot head of a ring
// of size slots once its k oldest are forgotten, k <= n: ring.forget, for
// a caller that holds head and n without a ring.
func forgotten(head, n, k, size int) (int, int) {
	if n -= k; n == 0 {
		return 0, 0
	}
	if head += k; head >= size {
		head -= size
	}
	return head, n
}

// ring is a view of a log's events: n of them from index head of t.
type ring struct {
	t       []atomic.Int64
	head, n int
}

// at is the i-th oldest event held, 0 <= i < n.
func (q *ring) at(i int) int64 { return stampAt(q.t, q.head, i) }

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

// deny writes into res the Result at now of a request of cost need that
// takes nothing: a denial, or a read (cost 0) when it fits. The gone
// oldest events have left the window and count remain.
//
// It and result write res field by field, as try does, rather than return
// a Result: a Result (or a ring) returned, or built as a composite literal,
// is built on the stack and then copied 16 bytes at a time, and a 16-byte
// load of two 8-byte stores just made waits until they reach the cache (a
// store is forwarded to a load only whole). On every check of every core.
func (q *ring) deny(res *Result, gone int, count, need, now, p, rate int64) {
	q.result(res, gone, now, p, rate)
	if res.Allowed = count+need <= rate; !res.Allowed {
		res.RetryAfter = q.at(gone+int(count+need-rate-1)) + p - now
	}
}

// result writes into res the state at now of q, whose gone oldest events
// have left the window: Remaining, ResetAfter (when the newest event
// leaves) and Next (when the oldest in the window does, freeing one more
// unit); its other fields are zeroed.
func (q *ring) result(res *Result, gone int, now, p, rate int64) {
	res.Allowed, res.RetryAfter, res.Delay, res.Slot = false, 0, 0, 0
	if q.n == gone {
		res.Remaining, res.ResetAfter, res.Next = rate, 0, 0
		return
	}
	res.Remaining = max(0, rate-int64(q.n-gone))
	res.ResetAfter = q.newest() + p - now
	res.Next = q.at(gone) + p - now
}

// forget forgets the k oldest events, k <= n.
func (q *ring) forget(k int) { q.head, q.n = forgotten(q.head, q.n, k, len(q.t)) }

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

// logUnits is how many keys a log whose ring's allocation holds slots
// timestamps counts for against the bound: those bytes, its 64-byte header
// and its table slot (under 64 bytes), in units of 32, what a window key
// costs. The allocator rounds a ring up by at most an eighth below 32 KiB,
// and to whole pages of 8 KiB above, which a count of the ring's Rate alone
// would miss. TestSlidingLogKeyCostsNoMoreThanItIsCountedFor measures it.
func logUnits(slots int) int { return (64 + 8*slots + 64 + 31) / 32 }
