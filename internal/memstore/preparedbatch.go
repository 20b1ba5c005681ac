package memstore

import "hash/maphash"

// MaxPrepared is the most requests a PreparedBatch holds.
const MaxPrepared = 4

// PreparedBatch is a TakeAll whose requests are fixed but for their keys,
// as Prepared is a Take: the rules' parts of the hashes, the GCRA tags and
// the validation settled once, and the working memory sized for a few
// requests rather than MaxBatch. A key given to several requests in a row
// is hashed once.
//
// A PreparedBatch is immutable and safe for concurrent use. Build one with
// Store.PrepareBatch.
type PreparedBatch struct {
	s *Store
	n int
	g int // the index of the one GCRA request among others, or -1: see takeSwapping
	// peekable is set when the requests other than g are window requests
	// of cost at most 1, whose state a denial by g only reads: see peek.
	peekable bool
	mix      [MaxPrepared]uint64
	reqs     [MaxPrepared]Request
}

// PrepareBatch returns the prepared form of reqs, whose Keys are ignored:
// 1 to MaxPrepared valid requests (as for TakeAll), none of them
// Concurrency. Explicit windows are allowed. It panics otherwise, since the
// caller decides this when it builds its rules.
func (s *Store) PrepareBatch(reqs []Request) *PreparedBatch {
	if len(reqs) == 0 || len(reqs) > MaxPrepared {
		panic("memstore: PrepareBatch: 1 to MaxPrepared requests")
	}
	b := &PreparedBatch{s: s, n: len(reqs), g: -1}
	gcras := 0
	for i, r := range reqs {
		if r.Alg == Concurrency || r.Limit.Rate <= 0 || r.Limit.Period <= 0 {
			panic("memstore: PrepareBatch: only GCRA and counting checks of a valid limit")
		}
		r.Key = ""
		r.Limit.Interval = r.Limit.interval()
		if r.Alg == GCRA {
			r.tag = uint8(s.tags.of(r.Limit.Interval))
		}
		b.mix[i] = s.mix(&r)
		b.reqs[i] = r
		if r.Alg == GCRA {
			gcras++
			b.g = i
		}
	}
	if gcras != 1 || b.n == 1 {
		b.g = -1
	}
	b.peekable = true
	for i, r := range b.reqs[:b.n] {
		if i != b.g && (tableOf(r.Alg) != windowTable || r.Cost > 1 || r.Force) {
			b.peekable = false
		}
	}
	return b
}

// Len is the number of requests of b.
func (b *PreparedBatch) Len() int { return b.n }

// Request returns b's request i, without its key.
func (b *PreparedBatch) Request(i int) *Request { return &b.reqs[i] }

// Take is TakeAll of b's requests with keys[i] the key of request i, at
// now: every request allowed and consumed, or none consumed. keys and
// results hold at least b.Len() elements.
func (b *PreparedBatch) Take(keys []string, results []Result, now int64) {
	s := b.s
	var hashes [MaxPrepared]uint64
	var kh uint64
	for i := range b.n {
		if i == 0 || keys[i] != keys[i-1] {
			kh = maphash.String(s.seed, keys[i])
		}
		h := kh ^ b.mix[i]
		if h == 0 {
			h = 1
		}
		if b.reqs[i].Alg == GCRA {
			h = tagged(h, uint64(b.reqs[i].tag))
		}
		hashes[i] = h
	}
	if b.g >= 0 && b.takeSwapping(&hashes, results, now) {
		return
	}
	var locks [MaxPrepared]int
	var hs [MaxPrepared]held
	var which [MaxPrepared]uint8
	var log [MaxPrepared]undo
	s.takeAll(b.reqs[:b.n], hashes[:b.n], results[:b.n], now, batchScratch{locks[:], hs[:], which[:], log[:]})
}

// takeSwapping is Take of a batch of one GCRA request (g) among others
// whose key already has a live state of its own: the others' shards locked
// as takeAll locks them, but the GCRA key's state swapped in without its
// shard's lock or a hold, as a lone Take swaps it (gshard.tryTake). The
// batch takes effect at that swap, the other states waiting for it under
// their locks, so that two requests of one key on two cores queue on one
// lock, not two; and on none when the others' keys are hot (see takeHot),
// which the locked take makes them when it finds them twice in a row. It
// reports false, having changed nothing, when the key needs its shard's
// lock (absent, held by a TakeAll, dropped or moved): takeAll decides then.
func (b *PreparedBatch) takeSwapping(hashes *[MaxPrepared]uint64, results []Result, now int64) bool {
	s, g := b.s, b.g
	sl := s.gcra[s.index(hashes[g])].slab.Load()
	i := sl.find(hashes[g])
	if i < 0 {
		return false
	}
	tat := &sl.tats[i]
	var locks, shards [MaxPrepared]int // shards[j]: request j's shard's index
	n, hot := 0, b.peekable            // every other key its shard's hot key: see takeHot
	for j := range b.n {
		if j != g {
			k := s.index(hashes[j])
			shards[j] = k
			locks[n] = k + tableOf(b.reqs[j].Alg)*len(s.gcra)
			n++
			if hot {
				c := s.windows[k].hot.Load()
				hot = c != nil && c.h == hashes[j]
			}
		}
	}
	if hot && b.takeHot(hashes, tat, results, now) {
		return true
	}
	order := sortUnique(locks[:n])
	for _, l := range order {
		s.lockIndex(l, true)
	}
	old := tat.Load()
	if old == dead {
		unlockAll(s, order)
		return false
	}
	r := &b.reqs[g]
	next, d := gcraDecide(old, now, r)
	if !d.allowed && b.peek(hashes, results, now) {
		// Denied by the rate: the others' states only read, as the batch's
		// rollback would leave and report them.
		results[g] = d.result(now, r)
		b.promote(hashes, &shards)
		unlockAll(s, order)
		return true
	}
	var log [MaxPrepared]undo
	denied := false
	for j := range b.n {
		if j != g {
			log[j] = s.remember(&b.reqs[j], hashes[j])
			s.apply(hashes[j], &b.reqs[j], now, &results[j])
			denied = denied || !results[j].Allowed
		}
	}
	for {
		results[g] = d.result(now, r)
		if denied || !d.allowed {
			b.rollback(hashes, &log, results, old, now) // the key's state unchanged
			b.promote(hashes, &shards)
			unlockAll(s, order)
			return true
		}
		if r.Cost == 0 || tat.CompareAndSwap(old, next) {
			b.promote(hashes, &shards)
			unlockAll(s, order)
			return true
		}
		if old = tat.Load(); old == dead { // held or dropped meanwhile
			b.rollback(hashes, &log, results, next, now)
			unlockAll(s, order)
			return false
		}
		next, d = gcraDecide(old, now, r)
	}
}

// peek fills the results of b's requests other than its GCRA one (g) as a
// denied batch reports them, without changing their states, when it can:
// each is a window request of cost at most 1 on a key of its own, whose
// denial does not depend on the cost and whose allowance is reported as a
// take of cost 0 (see Store.rollback). The caller holds their shards'
// locks. It reports false, having read nothing, otherwise.
func (b *PreparedBatch) peek(hashes *[MaxPrepared]uint64, results []Result, now int64) bool {
	if !b.peekable {
		return false
	}
	for j := range b.n {
		for k := range j {
			if j != b.g && k != b.g && hashes[j] == hashes[k] {
				return false // the second sees the first's take: see takeAll
			}
		}
	}
	for j := range b.n {
		if j != b.g {
			peek := b.reqs[j]
			peek.Cost = 0
			b.s.apply(hashes[j], &peek, now, &results[j])
		}
	}
	return true
}

// rollback is takeAll's rollback of takeSwapping's requests, the GCRA
// key's state tat, which was not changed.
func (b *PreparedBatch) rollback(hashes *[MaxPrepared]uint64, log *[MaxPrepared]undo, results []Result, tat, now int64) {
	var which [MaxPrepared]uint8
	which[b.g] = 1
	hs := [1]held{{h: hashes[b.g], slot: -1, orig: tat, cur: tat}}
	b.s.rollback(b.reqs[:b.n], hs[:], which[:b.n], log[:b.n], results[:b.n], now)
}

// unlockAll unlocks the shards of order, locked by lockIndex.
func unlockAll(s *Store, order []int) {
	for _, l := range order {
		s.lockIndex(l, false)
	}
}
