package memstore

import (
	"math"
	"sync/atomic"
)

// cshard is a shard of Concurrency keys. Its lock guards its table and the
// keys' queues, but for one key at most: the shard's hot key, whose queue
// is changed under the queue's own lock (slots.mu), without the shard's,
// so that the acquisitions and releases of one key on several cores move
// the queue's cache line between them and not the shard's lock too.
//
// A key becomes hot when two acquisitions in a row that took the shard's
// lock were its own. Its queue then stays in the table while it is hot
// (its expiry reads as never, so no sweep drops it), until another key
// becomes hot, the key is deleted, a new key would make the shard evict,
// or a TakeAll names the key: each takes the shard's lock and then the
// queue's, and ends the heat, so that what is done under the shard's lock
// sees every queue whole, as before. Whoever reaches the queue through hot
// checks, under the queue's lock, that it is still hot, and else takes
// the shard's lock as for any other key.
//
// A release through a Held of an acquisition from the hot queue takes no
// lock: it leaves its token in the queue's returned box, which whoever
// next holds the queue's lock while it is hot applies first, and demote
// applies once it has ended the heat (see releaseHeld).
//
// Tokens still grow along each queue and never repeat in a shard: a hot
// queue draws them from a block of the shard's counter reserved for it
// (up to end), and reserves the next block under the shard's lock when it
// runs out.
type cshard struct {
	shard[*slots]
	// last is the key of the last acquisition under the lock, or 0: on
	// the line of the table's length, which every probe reads anyway.
	last   uint64
	hot    atomic.Pointer[slots] // nil, or the hot key's queue
	hotKey atomic.Uint64         // the hot key; changed only while hot is nil
	end    atomic.Uint64         // the last token of the hot queue's block
	_      [48]byte
}

// tokenBlock is how many tokens a hot queue reserves at a time.
const tokenBlock = 1 << 16

// hotFor returns key h's queue locked by its own lock if h is the hot key,
// else nil.
func (sh *cshard) hotFor(h uint64) *slots {
	q := sh.hot.Load()
	if q == nil || sh.hotKey.Load() != h {
		return nil
	}
	q.mu.Lock()
	// Checked again under q's lock: q may have stopped being hot, or been
	// made hot again for its own key while hotKey was read for another's.
	// While q is hot and locked, neither changes (see promote and demote).
	if sh.hot.Load() != q || sh.hotKey.Load() != h {
		q.mu.Unlock()
		return nil
	}
	return q
}

// take acquires r's slots for key h at now.
func (sh *cshard) take(capacity int, h uint64, r *Request, now int64) Result {
	res, _ := sh.takeHeld(capacity, h, r, now)
	return res
}

// takeHeld is take that also returns the key's queue when the slots were
// taken from it as the shard's hot queue (see Held), else nil.
func (sh *cshard) takeHeld(capacity int, h uint64, r *Request, now int64) (Result, *slots) {
	if sh.hot.Load() != nil {
		if q := sh.hotFor(h); q != nil {
			if next := q.hotNext(); next < sh.end.Load() {
				q.applyReturned(now)
				res := q.take(now, r.Limit, r.Cost, &next)
				q.setHotNext(next)
				q.mu.Unlock()
				return res, q
			}
			q.mu.Unlock() // out of tokens: the next block under the shard's lock
		}
	}
	sh.mu.Lock()
	res := applySlots(sh, capacity, h, r, now)
	if r.Cost > 0 { // an acquisition: the second of h in a row makes h hot
		if sh.last == h {
			sh.promote(h)
		} else {
			sh.last = h
		}
	}
	sh.mu.Unlock()
	return res, nil
}

// release gives back the slots of key h named by token (see
// slots.release).
func (sh *cshard) release(h, token uint64, cost, now int64) {
	if sh.hot.Load() != nil {
		if q := sh.hotFor(h); q != nil {
			q.applyReturned(now)
			q.release(now, token, cost)
			q.mu.Unlock()
			return
		}
	}
	sh.mu.Lock()
	if q, ok := sh.t.get(h); ok {
		hot := sh.hot.Load() == q // stable under the shard's lock
		if hot {
			q.mu.Lock()
			q.applyReturned(now)
		}
		q.release(now, token, cost)
		if hot {
			q.mu.Unlock()
		}
	}
	sh.mu.Unlock()
}

// releaseHeld is release of the slots that hd's acquisition took, named
// by token. If they came from the hot queue, the token is left in the
// queue's returned box, without the queue's lock, for the next holder of
// the lock to apply: one write of the queue's line, which the next
// acquisition needs anyway, and no wait. It goes the locked way when the
// box is full or the queue is no longer hot.
func (sh *cshard) releaseHeld(hd *Held, token uint64, cost, now int64) {
	if q := hd.q; q != nil && token != 0 && q.returned.CompareAndSwap(0, token) {
		// q is hd's key's own queue. Seen hot after the token was left,
		// it is demoted (if ever) after this load, and demote applies
		// the box after it stops the heat: the token is applied once,
		// by demote or by an acquisition before it.
		if sh.hot.Load() == q {
			return
		}
		// Not hot: take the token back, unless a holder of q's lock
		// applied it already.
		if !q.returned.CompareAndSwap(token, 0) {
			return
		}
	}
	sh.release(hd.h, token, cost, now)
}

// takeHot is applySlots for the hot queue q; the caller holds the shard's
// lock.
func (sh *cshard) takeHot(q *slots, r *Request, now int64) Result {
	q.mu.Lock()
	q.applyReturned(now)
	if q.hotNext() >= sh.end.Load() { // the block ran out: the next one
		sh.reserveBlock(q)
	}
	next := q.hotNext()
	res := q.take(now, r.Limit, r.Cost, &next)
	q.setHotNext(next)
	q.mu.Unlock()
	return res
}

// reserveBlock gives hot queue q the next block of the shard's tokens.
// The caller holds the shard's lock and q's.
func (sh *cshard) reserveBlock(q *slots) {
	q.setHotNext(sh.seq)
	sh.seq += tokenBlock
	sh.end.Store(sh.seq)
}

// promote makes key h hot, its locked acquisition just made following
// another one of h (see take), in place of the shard's hot key if it has
// one. The caller holds the shard's lock.
func (sh *cshard) promote(h uint64) {
	q, ok := sh.t.get(h)
	if !ok || sh.hot.Load() == q {
		return
	}
	sh.demote()
	q.mu.Lock()
	sh.reserveBlock(q) // and so q reads as never expiring (see slots.last)
	sh.hotKey.Store(h)
	sh.hot.Store(q)
	q.mu.Unlock()
}

// demote ends the shard's hot key, if any: its queue is guarded by the
// shard's lock again, and kept until its last live slot's deadline (or,
// with none, dropped by the next sweep: an empty queue is as good as none).
// The caller holds the shard's lock.
func (sh *cshard) demote() {
	q := sh.hot.Load()
	if q == nil {
		return
	}
	q.mu.Lock()
	sh.hot.Store(nil)
	// After the store: a release that saw q hot left its token before it
	// (see releaseHeld). Applied at the earliest time, so that it expires
	// nothing that the key's next check would not.
	q.applyReturned(math.MinInt64)
	q.last = max(0, q.resetAt()) // not hot: a deadline again
	q.mu.Unlock()
	lower(&sh.shard, q.last)
}

// demoteKey ends the shard's hot key if it is h. The caller holds the
// shard's lock.
func (sh *cshard) demoteKey(h uint64) {
	if sh.hot.Load() != nil && sh.hotKey.Load() == h {
		sh.demote()
	}
}
