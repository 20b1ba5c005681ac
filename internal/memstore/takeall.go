package memstore

import (
	"errors"
	"sync"
)

// ErrTooManyRequests is returned by TakeAll for more requests than it takes.
var ErrTooManyRequests = errors.New("too many requests in one call")

// MaxBatch is the most requests one TakeAll accepts.
const MaxBatch = 64

// undo remembers a key's state before TakeAll changed it.
type undo struct {
	h       uint64
	table   int
	existed bool
	tat     tat
	win     window
}

// The tables, numbered for TakeAll's lock order.
const (
	gcraTable = iota
	windowTable
	concTable
)

func tableOf(a Alg) int {
	switch a {
	case GCRA:
		return gcraTable
	case Concurrency:
		return concTable
	}
	return windowTable
}

// apply decides r in its table; the caller holds the shard's lock.
func (s *Store) apply(t int, h uint64, r *Request, now int64) Result {
	i := s.index(h)
	switch t {
	case gcraTable:
		return applyGCRA(&s.gcra[i], s.perCap, h, r, now)
	case concTable:
		return applySlots(&s.conc[i], s.perCap, h, r, now)
	}
	return applyWindow(&s.windows[i], s.perCap, h, r, now)
}

// TakeAll checks every request at now and consumes them only if all are
// allowed. It locks every shard involved, in index order so that concurrent
// calls cannot deadlock, applies the requests one by one (so a key named
// twice sees its own earlier update) and rolls back if any is denied.
func (s *Store) TakeAll(reqs []Request, results []Result, now int64) error {
	if len(reqs) > MaxBatch {
		return ErrTooManyRequests
	}
	var hashes [MaxBatch]uint64
	var locks [MaxBatch]int // shard index + table*len(shards)
	n := len(s.gcra)
	for i := range reqs {
		r := &reqs[i]
		hashes[i] = s.hash(r)
		locks[i] = s.index(hashes[i]) + tableOf(r.Alg)*n
	}
	order := sortUnique(locks[:len(reqs)])
	for _, l := range order {
		s.lockIndex(l, true)
	}
	defer func() {
		for _, l := range order {
			s.lockIndex(l, false)
		}
	}()

	var log [MaxBatch]undo
	denied := false
	for i := range reqs {
		r := &reqs[i]
		h := hashes[i]
		u := &log[i]
		u.h, u.table = h, tableOf(r.Alg)
		switch u.table {
		case gcraTable:
			u.tat, u.existed = s.gcra[s.index(h)].t.get(h)
		case windowTable:
			u.win, u.existed = s.windows[s.index(h)].t.get(h)
		default:
			_, u.existed = s.conc[s.index(h)].t.get(h)
		}
		results[i] = s.apply(u.table, h, r, now)
		denied = denied || !results[i].Allowed
	}
	if !denied {
		return nil
	}
	// Roll back in reverse so a key named twice ends at its first state,
	// then report every request as it stands with nothing consumed.
	for i := len(reqs) - 1; i >= 0; i-- {
		s.rollback(&log[i], &results[i])
	}
	for i := range reqs {
		if !results[i].Allowed {
			continue
		}
		peek := reqs[i]
		peek.Cost = 0
		results[i] = s.apply(log[i].table, hashes[i], &peek, now)
		results[i].Allowed = true
	}
	return nil
}

// rollback undoes one request of a denied TakeAll.
func (s *Store) rollback(u *undo, res *Result) {
	i := s.index(u.h)
	switch u.table {
	case gcraTable:
		restore(&s.gcra[i], u.h, u.tat, u.existed)
	case windowTable:
		restore(&s.windows[i], u.h, u.win, u.existed)
	default:
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
		mu = &s.windows[l-n].mu
	default:
		mu = &s.conc[l-2*n].mu
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
