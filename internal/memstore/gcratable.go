package memstore

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// gshard is a shard of GCRA keys whose state a check updates without the
// shard lock: a key's theoretical arrival time is one word, which a check
// replaces by compare-and-swap, so that checks of one hot key on several
// cores do not queue on a lock. The lock serialises what changes which key
// a slot holds: insertions, drops, evictions, rebuilds, and TakeAll.
//
// The table is a slab: open addressing with linear probing, keys and times
// in two arrays read and written atomically. Within one slab a slot never
// holds another key once it has held one. A lock-free check finds its key's
// slot, reads the time, decides, and swaps in the new time only if the time
// is unchanged; were the slot able to pass to another key, that swap could
// land on the other key's state when both times happened to be equal (the
// ABA problem). So a dropped key leaves its slot marked dead (its time set
// to dead, its key kept, so that probe sequences stay unbroken and the same
// key can come back to it), and dead slots are only reclaimed by copying
// the live entries into a new slab. A check still holding the old slab then
// finds every slot dead: the copy marked each slot dead as it moved it
// (a swap, so no update made before is lost), and an abandoned slab is
// never written again. The garbage collector frees it once no check holds
// it.
//
// Dead therefore means "ask under the lock": a dead slot is a dropped key,
// or one that TakeAll or a rebuild holds for the moment. Under the lock a
// dead slot of the current slab is always a dropped key.
type gshard struct {
	mu   sync.Mutex
	slab atomic.Pointer[slab]
	// live counts the keys with a state, used the slots holding a key
	// (live or dead). Both change under mu only.
	live, used int
	// floor is at most the expiry of every entry: while now < floor the
	// shard holds no expired entry. Checks only move times later, so it
	// stays a lower bound without the lock.
	floor int64
	// holes are the keys' reservations given back while later ones waited
	// (see gcraholes.go), nholes their number; under mu.
	holes  map[uint64]holes
	nholes int
	_      [8]byte
}

// slab is one table of a gshard. Its arrays never change size.
type slab struct {
	keys []atomic.Uint64 // 0 marks an empty slot
	tats []atomic.Int64  // dead marks a dropped or held key
	_    [16]byte        // a whole cache line: see TestHotStateFillsWholeCacheLines
}

// dead is the time of a slot whose key has no state. No check stores it:
// a stored time is at least a check's now plus an interval, and a Return
// is stored as one nanosecond later (see live).
const dead = math.MinInt64

// live keeps v clear of dead.
func live(v int64) int64 { return max(v, dead+1) }

// gcraLoad bounds: below the slab's last size a slab grows when its used
// slots would pass 3/4; at its last size (see gcraSlots) it is rebuilt when
// they would pass 13/16, which leaves at least 3/16 of its slots to dead
// entries between two rebuilds of a full shard.
const (
	growNum, growDen = 3, 4
	fullNum, fullDen = 13, 16
)

// gcraSlots is the last size of the slab of a shard of bound keys: at most
// 5/8 full of live keys (about 26 bytes a key at the bound).
func gcraSlots(bound int) int { return max(8, bound*8/5+1) }

// home is the first slot of key h's probe sequence, whatever its tag (see
// gcratags.go).
func (sl *slab) home(h uint64) int {
	hi, _ := bits.Mul64(bits.RotateLeft64(h&^tagMask, 32), uint64(len(sl.keys)))
	return int(hi)
}

// find returns h's slot, or -1. Keys never move within a slab, so without
// the lock it may miss only a key inserted meanwhile.
func (sl *slab) find(h uint64) int {
	if sl == nil {
		return -1
	}
	for i := sl.home(h); ; {
		switch sl.keys[i].Load() {
		case h:
			return i
		case 0:
			return -1
		}
		if i++; i == len(sl.keys) {
			i = 0
		}
	}
}

// tryTake decides r for key h without the lock. It reports false when the
// decision needs it: a new key that the request would store, a dead slot,
// or a state under a longer interval's tag, to move to h's (see
// gcratags.go). A state under a shorter one is decided where it is.
// Otherwise the decision is linearised at the read (nothing stored) or at
// the swap.
func (sh *gshard) tryTake(h uint64, r *Request, tg *tags, now int64) (gcraDecision, bool) {
	sl := sh.slab.Load()
	i := sl.find(h)
	own := true // the state is under h's tag
	if i < 0 {
		if i, own = sl.other(h), false; i < 0 {
			// Absent when the slab was loaded: keys are never removed
			// from a slab, so one present then would have been found.
			_, d := gcraDecide(0, now, r)
			return d, !d.allowed || r.Cost == 0
		}
		if tg.moves(sl.keys[i].Load(), r.Limit.interval()) {
			return gcraDecision{}, false
		}
	}
	p := &sl.tats[i]
	for {
		old := p.Load()
		if old == dead {
			// h's own slot, dropped, while the key's state stays under
			// a shorter interval's tag: decided there.
			if j := sl.other(h); j >= 0 && j != i && !tg.moves(sl.keys[j].Load(), r.Limit.interval()) {
				i, p, own = j, &sl.tats[j], false
				continue
			}
			return gcraDecision{}, false
		}
		if old <= now && !own {
			return gcraDecision{}, false // owes nothing: to h's own tag
		}
		next, d := gcraDecide(old, now, r)
		if !d.allowed || r.Cost == 0 || p.CompareAndSwap(old, next) {
			return d, true
		}
	}
}

// take decides r for key h (tagged with r's interval), under the lock only
// when tryTake cannot.
func (sh *gshard) take(capacity int, h uint64, r *Request, tg *tags, now int64) gcraDecision {
	if d, ok := sh.tryTake(h, r, tg, now); ok {
		return d
	}
	sh.mu.Lock()
	d := sh.takeLocked(capacity, h, r, tg, now)
	sh.mu.Unlock()
	return d
}

// takeLocked is take with the lock held.
func (sh *gshard) takeLocked(capacity int, h uint64, r *Request, tg *tags, now int64) gcraDecision {
	sh.adopt(capacity, h, r.Limit.interval(), tg, now)
	if d, ok := sh.tryTake(h, r, tg, now); ok { // a live key: lock-free checks may race
		return d
	}
	next, d := gcraDecide(0, now, r) // absent or dropped
	if d.allowed && r.Cost > 0 {
		sh.insert(capacity, h, next, now)
	}
	return d
}

// force applies forced request r (a settlement) to key h at now under the
// lock: rare, so it need not be lock-free, but lock-free checks may still
// swap the key's time meanwhile.
func (sh *gshard) force(capacity int, h uint64, r *Request, tg *tags, now int64) Result {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sl, i := sh.resolve(capacity, h, r.Limit.interval(), tg, now)
	if i >= 0 {
		p := &sl.tats[i]
		for {
			old := p.Load()
			if old == dead { // dropped: inserted below
				break
			}
			next, res := gcraForce(old, now, r)
			if p.CompareAndSwap(old, next) {
				return res
			}
		}
	}
	next, res := gcraForce(0, now, r)
	if r.Cost > 0 {
		sh.insert(capacity, h, next, now)
	}
	return res
}

// get returns h's state and whether it has one. The caller holds the lock.
func (sh *gshard) get(h uint64) (int64, bool) {
	sl := sh.slab.Load()
	if i := sl.find(h); i >= 0 {
		if v := sl.tats[i].Load(); v != dead {
			return v, true
		}
	}
	return 0, false
}

// hold marks the slot of h's key's state dead, so that no lock-free check
// changes it until release, and returns the slot and the state. A state
// under a longer interval's tag than t is taken out of its slot instead and
// returned with slot -1 and moved set, for the caller to insert under h
// once it releases its holds (an insertion may rebuild the slab). The
// caller holds the lock until release.
func (sh *gshard) hold(h uint64, t int64, tg *tags, now int64) (slot int, v int64, moved bool) {
	sl := sh.slab.Load()
	i := sl.find(h)
	if i < 0 || sl.tats[i].Load() == dead {
		if i = sl.other(h); i >= 0 && tg.moves(sl.keys[i].Load(), t) {
			v, moved = sh.move(h, t, tg, now)
			return -1, v, moved
		}
	}
	if i >= 0 {
		if v := sl.tats[i].Swap(dead); v != dead {
			return i, v, false
		}
	}
	return -1, 0, false
}

// release stores v into a slot that hold returned, ending the hold.
func (sh *gshard) release(slot int, v int64) {
	sh.slab.Load().tats[slot].Store(v)
	sh.floor = min(sh.floor, v)
}

// insert stores v for h, which has no state, making room first. The
// caller holds the lock.
func (sh *gshard) insert(capacity int, h uint64, v int64, now int64) {
	sh.makeRoom(capacity, h, now)
	sh.floor = min(sh.floor, v)
	sl := sh.slab.Load()
	if i := sl.find(h); i >= 0 { // the key's own dead slot
		sl.tats[i].Store(v)
		sh.live++
		return
	}
	sl = sh.roomFor(capacity)
	place(sl, h, v)
	sh.live++
	sh.used++
}

// place writes h and v into the first empty slot of h's probe sequence:
// the time first, so that a check that sees the key sees its time.
func place(sl *slab, h uint64, v int64) {
	i := sl.home(h)
	for sl.keys[i].Load() != 0 {
		if i++; i == len(sl.keys) {
			i = 0
		}
	}
	sl.tats[i].Store(v)
	sl.keys[i].Store(h)
}

// roomFor returns the slab to place one more key in, rebuilt if its used
// slots would pass its load bound: larger while live keys need it, the
// same size when dead slots are what filled it.
func (sh *gshard) roomFor(capacity int) *slab {
	sl := sh.slab.Load()
	n, last := 0, gcraSlots(capacity)
	if sl != nil {
		n = len(sl.keys)
	}
	num, den := growNum, growDen
	if n >= last {
		num, den = fullNum, fullDen
	}
	if n > 0 && (sh.used+1)*den <= n*num {
		return sl
	}
	// Rebuilt at the same size, the slab must have room for n/8 more keys
	// (3/16 of it at its last size), so that rebuilds stay amortised.
	size := n
	if n < last && n*num/den-sh.live-1 < n/8 {
		size = min(max(16, n+n/2), last)
	}
	return sh.rebuild(size)
}

// rebuild copies the live entries into a new slab of size slots, marking
// each old slot dead as it moves it, and publishes the new slab.
func (sh *gshard) rebuild(size int) *slab {
	next := &slab{keys: make([]atomic.Uint64, size), tats: make([]atomic.Int64, size)}
	if sl := sh.slab.Load(); sl != nil {
		for i := range sl.keys {
			if k := sl.keys[i].Load(); k != 0 {
				if v := sl.tats[i].Swap(dead); v != dead {
					place(next, k, v)
				}
			}
		}
	}
	sh.used = sh.live
	sh.slab.Store(next)
	return next
}

// drop removes the state of h's key, under whichever tag, if any. The
// caller holds the lock.
func (sh *gshard) drop(h uint64) {
	sl := sh.slab.Load()
	if i := sl.find(h); i >= 0 {
		sh.dropAt(sl, i)
	}
	if i := sl.other(h); i >= 0 {
		sh.dropAt(sl, i)
	}
}

func (sh *gshard) dropAt(sl *slab, i int) (int64, bool) {
	if v := sl.tats[i].Swap(dead); v != dead {
		sh.live--
		sh.dropHoles(sl.keys[i].Load())
		return v, true
	}
	return 0, false
}

// dropExpired drops slot i's entry if it has expired by now. A check may
// have renewed it since it was read, so the time swapped out decides: a
// renewed entry is put back.
func (sh *gshard) dropExpired(sl *slab, i int, now int64) bool {
	v := sl.tats[i].Swap(dead)
	if v == dead {
		return false
	}
	if v > now {
		sl.tats[i].Store(v)
		return false
	}
	sh.live--
	sh.dropHoles(sl.keys[i].Load())
	return true
}

// len returns the number of keys with a state.
func (sh *gshard) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.live
}
