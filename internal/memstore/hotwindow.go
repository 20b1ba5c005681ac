package memstore

import (
	"math"
	"sync/atomic"
)

// wshard is a shard of fixed- and sliding-window keys. Its table is guarded
// by the lock, except for one key at most: the shard's hot key, whose count
// checks update without the lock (see hotWindow), so that checks of one
// key on several cores do not queue on the lock.
//
// A key becomes hot when two checks in a row that took the lock were its
// own (epoch-aligned, not forced): a key hit by many clients at once. The
// table keeps the hot key's entry, with its window (so that sweeps see
// when it expires) but not its count. A check or change of the hot key
// under the lock, and any insertion (which may sweep or evict it), first
// folds the count back into the table and retires the hot state (see
// lockFor), so that what is done under the lock sees the table whole, as
// before. A busy key becomes hot again by its next two locked checks; a
// shard whose checks go to many keys in turn keeps none hot and allocates
// nothing.
//
// What a locked check of a key that is not hot writes (the lock, last, the
// key's entry) is on the shard's first cache line and in the table's
// arrays; the rest of the shard is only read then (see store), so that
// checks of many keys on several cores move as few lines between them as
// they can.
type wshard struct {
	hot  atomic.Pointer[hotWindow] // nil, or the hot key's state
	last uint64                    // the key of the last aligned check under the lock, or 0
	shard[window]
}

// hotWindow is the state of a hot window key: the window and, for a sliding
// window, the previous window's count, which checks never change, and the
// current window's count, which checks raise by compare-and-swap. When the
// state moves to another window, or anything else changes it, the lock is
// taken and the hot state retired: its count swapped for retired, which no
// swap expects, so that a check that read the state before cannot store
// into it. Until then the count is all of the state that checks read, so a
// swap that succeeds found the state as it read it, even of a count that a
// stacked batch raised and lowered again meanwhile (see preparedhot.go): a
// hotWindow is never reused.
//
// The count, which every check of the key on every core writes, has a
// cache line of its own, apart from what checks only read: were they on
// one line, reading the window after a swap would take the line back from
// the core that swapped since, one more move of the line for each check.
type hotWindow struct {
	h   uint64 // the key
	end int64  // window.Expires
	// period is a period that end is a multiple of, or 0: for a check of
	// that period, the window is known without a division (see take).
	period int64
	// folded is the table's removal count when c was folded back into
	// it, under the lock: while it stands, the key's entry is c's count
	// (see giveBack).
	folded uint64
	prev   uint32        // window.B
	_      [28]byte      // the rest of the first cache line
	count  atomic.Uint64 // the window's count (window.A), or retired
	_      [56]byte      // the rest of the second line: the count's alone
}

// retired is the count of a hotWindow that no longer holds its key's state.
const retired = math.MaxUint64

// lockFor locks the shard for a check or change of key h, folding the
// hot key's count back into the table first if h is the hot key or is
// absent (its insertion may sweep or evict the hot key).
func (sh *wshard) lockFor(h uint64) {
	sh.mu.Lock()
	if c := sh.hot.Load(); c != nil && (c.h == h || sh.t.find(h) < 0) {
		sh.fold(c)
	}
}

// lockAll locks the shard with its table whole: no key hot.
func (sh *wshard) lockAll() {
	sh.mu.Lock()
	if c := sh.hot.Load(); c != nil {
		sh.fold(c)
	}
}

// fold retires the hot state c, writing its count back into the table.
// The caller holds the lock.
func (sh *wshard) fold(c *hotWindow) {
	sh.hot.Store(nil)
	n := c.count.Swap(retired)
	sh.t.set(c.h, window{Expires: c.end, A: uint32(n), B: c.prev})
	c.folded = sh.t.removed
}

// promote makes key h hot when the locked check r on it follows another
// locked check on h, in place of the shard's hot key if it has one. The
// caller holds the lock, and has finished with the table: the hot state is
// a copy of h's entry.
func (sh *wshard) promote(h uint64, r *Request) {
	if !hotEligible(r) {
		sh.last = 0
		return
	}
	if sh.last != h {
		sh.last = h
		return
	}
	if w, ok := sh.t.get(h); ok {
		period := int64(0)
		if mod(w.Expires, r.Limit.Period) == 0 {
			period = r.Limit.Period
		}
		sh.makeHot(h, w, period)
	}
}

// makeHot makes key h, at w in the table, the shard's hot key, in place of
// the hot key it has, if any (another key's: lockFor folded h's); period
// is the hot state's (see hotWindow). The caller holds the lock.
func (sh *wshard) makeHot(h uint64, w window, period int64) {
	if old := sh.hot.Load(); old != nil {
		sh.fold(old)
	}
	c := &hotWindow{h: h, end: w.Expires, period: period, prev: w.B}
	c.count.Store(uint64(w.A))
	sh.hot.Store(c)
}

// hotEligible reports whether r may be decided on a hot state: an
// epoch-aligned window (an explicit one, a quota's, takes the lock) and
// not a settlement.
func hotEligible(r *Request) bool { return r.WinEnd == 0 && !r.Force }

// tryTake decides r for the hot key h without the lock, as applyWindow
// would on the same state. It reports false when the decision needs the
// lock: h is not the hot key, the hot state was retired, or r would move
// the key to another window. Otherwise the decision is linearised at the
// read of the count (nothing stored) or at the swap.
func (sh *wshard) tryTake(h uint64, r *Request, now int64) (Result, bool) {
	c := sh.hot.Load()
	if c == nil || c.h != h || !hotEligible(r) {
		return Result{}, false
	}
	for {
		n := c.count.Load()
		if n == retired {
			return Result{}, false
		}
		w := window{Expires: c.end, A: uint32(n), B: c.prev}
		next, res := decideWindow(w, r, now)
		if !res.Allowed || r.Cost == 0 {
			return res, true
		}
		if next.Expires != w.Expires || next.B != w.B {
			return Result{}, false // a new window: under the lock
		}
		if c.count.CompareAndSwap(n, uint64(next.A)) {
			return res, true
		}
	}
}

// decideWindow is applyWindow's decision on r, epoch-aligned, for a key at
// w.
func decideWindow(w window, r *Request, now int64) (window, Result) {
	if r.Alg == SlidingWindow {
		return slidingWindow(w, now, r.Limit, r.Cost)
	}
	return fixedWindow(w, now, r.Limit, r.Cost, 0)
}
