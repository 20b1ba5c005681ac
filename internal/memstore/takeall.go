package memstore

import (
	"errors"
	"sync"
)

// ErrTooManyRequests is returned by TakeAll for more requests than it takes.
var ErrTooManyRequests = errors.New("too many requests in one call")

// MaxBatch is the most requests one TakeAll accepts.
const MaxBatch = 64

// undo remembers a window key's state before TakeAll changed it.
type undo struct {
	h       uint64
	existed bool
	win     window
}

// held is a GCRA key that TakeAll holds (see gshard.hold): no lock-free
// check changes it until TakeAll stores its final state. A key named twice
// is held once, and each request sees the state the previous one left.
type held struct {
	h         uint64
	sh        *gshard
	slot      int   // -1 for a key without a state
	orig, cur int64 // the state when held, and as the requests leave it
	stored    bool  // cur is to be stored
	moved     bool  // orig was moved from another tag: stored whatever happens
}

// The tables, numbered for TakeAll's lock order.
const (
	gcraTable = iota
	windowTable
	concTable
	logTable
)

func tableOf(a Alg) int {
	switch a {
	case GCRA:
		return gcraTable
	case Concurrency:
		return concTable
	case SlidingLog:
		return logTable
	}
	return windowTable
}

// apply decides r in the window or Concurrency table into *res; the caller
// holds the shard's lock.
func (s *Store) apply(h uint64, r *Request, now int64, res *Result) {
	i := s.index(h)
	switch r.Alg {
	case Concurrency:
		// Not hot while the batch holds its shard: see cshard.
		s.conc[i].demoteKey(h)
		*res = applySlots(&s.conc[i], s.perCap, h, r, now)
	case SlidingLog:
		sh := &s.logs[s.logIndex(h)]
		*res = sh.apply(sh.capacity, h, r, now, true) // released by releaseLogs
	default:
		applyWindow(&s.windows[i].shard, s.perCap, h, r, now, res)
	}
}

// TakeAll checks every request at now and consumes them only if all are
// allowed. It locks every shard involved, in index order so that concurrent
// calls cannot deadlock, holds the GCRA keys against lock-free checks,
// applies the requests one by one (so a key named twice sees its own
// earlier update) and rolls back if any is denied.
func (s *Store) TakeAll(reqs []Request, results []Result, now int64) error {
	if len(reqs) > MaxBatch {
		return ErrTooManyRequests
	}
	var hashes [MaxBatch]uint64
	for i := range reqs {
		r := &reqs[i]
		hashes[i] = s.hash(r)
		if r.Alg == GCRA {
			hashes[i] = s.gcraKey(r, hashes[i]) // the same shard: tags leave the top bits
		}
	}
	var locks [MaxBatch]int
	var hs [MaxBatch]held
	var which [MaxBatch]uint8
	var log [MaxBatch]undo
	s.takeAll(reqs, hashes[:len(reqs)], results, now, batchScratch{locks[:], hs[:], which[:], log[:]})
	return nil
}

// batchScratch is the working memory of one takeAll, as long as its
// requests at least, in arrays on its caller's stack: indices, not
// pointers, so that they stay there.
type batchScratch struct {
	locks []int // shard index + table*len(shards)
	hs    []held
	// which[i] is 1 + the index in hs of GCRA request i's held key, 0 for
	// another request.
	which []uint8
	log   []undo
}

// takeAll is TakeAll of reqs whose table keys are hashes (GCRA keys
// tagged), with at most MaxBatch requests.
func (s *Store) takeAll(reqs []Request, hashes []uint64, results []Result, now int64, sc batchScratch) {
	n := len(s.gcra)
	for i := range reqs {
		if reqs[i].Alg == SlidingLog { // as many log shards or fewer
			sc.locks[i] = s.logIndex(hashes[i]) + logTable*n
		} else {
			sc.locks[i] = s.index(hashes[i]) + tableOf(reqs[i].Alg)*n
		}
	}
	order := sortUnique(sc.locks[:len(reqs)])
	for _, l := range order {
		s.lockIndex(l, true)
	}
	defer func() {
		for _, l := range order {
			s.lockIndex(l, false)
		}
	}()
	g := s.hold(reqs, hashes, sc.hs[:0], sc.which[:], now)
	denied := false
	for i := range reqs {
		r := &reqs[i]
		if j := sc.which[i]; j > 0 {
			k := &g[j-1]
			next, d := gcraDecide(k.cur, now, r)
			if d.allowed && r.Cost > 0 {
				k.cur, k.stored = next, true
			}
			results[i] = d.result(now, r)
		} else {
			sc.log[i] = s.remember(r, hashes[i])
			s.apply(hashes[i], r, now, &results[i])
		}
		denied = denied || !results[i].Allowed
	}
	if !denied {
		s.commit(g, now)
	} else {
		s.rollback(reqs, g, sc.which[:len(reqs)], sc.log[:len(reqs)], results, now)
	}
	s.releaseLogs(reqs, hashes)
}

// releaseLogs ends the holds that apply kept on the sliding logs of reqs.
func (s *Store) releaseLogs(reqs []Request, hashes []uint64) {
	for i := range reqs {
		if reqs[i].Alg == SlidingLog {
			s.logs[s.logIndex(hashes[i])].releaseLog(hashes[i])
		}
	}
}

// hold holds the GCRA keys of reqs, appending them to hs, and sets
// which[i] to 1 + the index of request i's. A key with a state under
// another interval's tag is moved to the request's (see gcratags.go); a key
// named twice, under two intervals, is held under the first.
func (s *Store) hold(reqs []Request, hashes []uint64, hs []held, which []uint8, now int64) []held {
	for i := range reqs {
		if reqs[i].Alg != GCRA {
			continue
		}
		h := hashes[i]
		k := -1
		for j := range hs {
			if (hs[j].h^h)&^tagMask == 0 {
				k = j
			}
		}
		if k < 0 {
			sh := &s.gcra[s.index(h)]
			slot, v, moved := sh.hold(h, reqs[i].Limit.interval(), s.tags, now)
			hs = append(hs, held{h: h, sh: sh, slot: slot, orig: v, cur: v, moved: moved})
			k = len(hs) - 1
		}
		which[i] = uint8(k + 1)
	}
	return hs
}

// remember returns what rollback needs to undo r in the window table.
func (s *Store) remember(r *Request, h uint64) undo {
	u := undo{h: h}
	if r.Alg == Concurrency {
		_, u.existed = s.conc[s.index(h)].t.get(h)
	} else if r.Alg == SlidingLog {
		_, u.existed = s.logs[s.logIndex(h)].t.get(h)
	} else {
		u.win, u.existed = s.windows[s.index(h)].t.get(h)
	}
	return u
}

// commit stores the held keys' final states: the held slots first, which
// ends the holds, then the new keys, whose insertion may rebuild a slab.
func (s *Store) commit(hs []held, now int64) {
	for i := range hs {
		if k := &hs[i]; k.slot >= 0 {
			k.sh.release(k.slot, k.cur)
		}
	}
	for i := range hs {
		if k := &hs[i]; k.slot < 0 && (k.stored || k.moved && k.cur > now) {
			k.sh.insert(s.perCap, k.h, k.cur, now)
		}
	}
}

// rollback undoes a denied TakeAll: the held keys get their states back,
// the other requests are undone in reverse so that a key named twice ends
// at its first state; then every allowed request is reported as it stands
// with nothing consumed.
func (s *Store) rollback(reqs []Request, hs []held, which []uint8, log []undo, results []Result, now int64) {
	for i := range hs {
		if k := &hs[i]; k.slot >= 0 {
			k.sh.release(k.slot, k.orig)
		}
	}
	for i := range hs {
		if k := &hs[i]; k.slot < 0 && k.moved && k.orig > now {
			k.sh.insert(s.perCap, k.h, k.orig, now)
		}
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Alg != GCRA {
			s.undo(&reqs[i], &log[i], &results[i])
		}
	}
	for i := range reqs {
		if !results[i].Allowed {
			continue
		}
		peek := reqs[i]
		peek.Cost = 0
		if j := which[i]; j > 0 {
			_, d := gcraDecide(hs[j-1].orig, now, &peek)
			results[i] = d.result(now, &peek)
		} else {
			s.apply(log[i].h, &peek, now, &results[i])
		}
		results[i].Allowed = true
	}
}

// undo undoes one window or Concurrency request of a denied TakeAll.
func (s *Store) undo(r *Request, u *undo, res *Result) {
	i := s.index(u.h)
	if r.Alg == SlidingLog {
		if res.Allowed && r.Cost > 0 {
			s.logs[s.logIndex(u.h)].undo(u.h, r.Cost, u.existed)
		}
		return
	}
	if r.Alg != Concurrency {
		restore(&s.windows[i].shard, u.h, u.win, u.existed)
		return
	}
	sh := &s.conc[i]
	q, ok := sh.t.get(u.h)
	if !ok || res.Slot == 0 {
		return
	}
	q.undo(res.Slot)
	res.Slot = 0
	if !u.existed {
		sh.t.remove(u.h)
	}
}

func restore[V state](sh *shard[V], h uint64, v V, existed bool) {
	if existed {
		set(sh, h, v)
	} else {
		sh.t.remove(h)
	}
}

func (s *Store) lockIndex(l int, lock bool) {
	var mu *sync.Mutex
	n := len(s.gcra)
	switch l / n {
	case gcraTable:
		mu = &s.gcra[l].mu
	case windowTable:
		if lock { // folding the hot key back in
			s.windows[l-n].lockAll()
			return
		}
		mu = &s.windows[l-n].mu
	case concTable:
		mu = &s.conc[l-2*n].mu
	default:
		mu = &s.logs[l-3*n].mu
	}
	if lock {
		mu.Lock()
	} else {
		mu.Unlock()
	}
}

// sortUnique sorts a small slice in place (insertion sort: no allocation)
// and returns it without duplicates.
func sortUnique(a []int) []int {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	out := a[:0]
	for _, v := range a {
		if len(out) == 0 || v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
