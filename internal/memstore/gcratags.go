package memstore

import (
	"sync"
	"sync/atomic"
)

// A GCRA key's time measures what the key has used only in units of the
// refill interval it was written with: a debt of tat-now is (tat-now)/t
// units. Read under a shorter interval (a raised limit) it would owe more
// units than the key took, and the raise would grant nothing. So the
// interval travels with the time, and a request under a shorter interval
// first moves the debt to its own, re-expressed in its units (rescale): the
// new headroom is there at once. Under a longer interval (a lowered limit)
// the debt is read as it stands, where it is: the bucket is full again at
// the same moment, as before. The debt keeps the shorter interval while it
// owes anything, so requests under two limits in turn never move it back
// and forth (each move would hand out the raise again); once it owes
// nothing, the next request's interval takes over.
//
// The time is one word that checks swap without a lock, and a key costs 16
// bytes a slot, so the interval cannot sit beside it. It is named instead
// by a tag of 8 bits, in place of the low 8 bits of the key's 64-bit hash in
// the table (the rest, 56 bits, identify the key). A slot's key, tag
// included, never changes (see gshard), so the tag is as stable as the key:
// a debt moving to another interval moves to another slot, under the lock,
// leaving the old slot dead, and a key has a state in one slot at most. A
// lock-free check that does not find its key under its own tag looks for it
// under another (other): under a shorter interval it decides there, under
// a longer one it leaves the move to the lock (adopt).
//
// The Store hands out tags to the first 254 intervals it sees; a key
// written under any other interval gets unknownTag, whose debt is read as
// it stands under any interval (as if no tag existed).

const (
	tagMask    = 1<<8 - 1
	unknownTag = tagMask
	indexSlots = 512 // intervals, open addressing: at most 1/2 full of tagged ones
	indexFull  = indexSlots * 3 / 4
)

// tags maps refill intervals to tags and back. Entries are written once,
// under mu, and read without it.
type tags struct {
	mu    sync.Mutex
	n     int // tags handed out
	used  int // index entries
	full  atomic.Bool
	ivs   [tagMask + 1]atomic.Int64 // the interval of each tag, 0 for none
	index [indexSlots]tagEntry
}

type tagEntry struct {
	iv  atomic.Int64 // 0: empty
	tag atomic.Uint64
}

func indexHome(iv int64) int { return int(uint64(iv) * 0x9e3779b97f4a7c15 >> 55) }

// of returns the tag of interval iv, handing out a new one if needed.
func (tg *tags) of(iv int64) uint64 {
	for i := indexHome(iv); ; i = (i + 1) % indexSlots {
		switch tg.index[i].iv.Load() {
		case iv:
			return tg.index[i].tag.Load()
		case 0:
			if tg.full.Load() {
				return unknownTag
			}
			return tg.add(iv)
		}
	}
}

// add records iv, with the next tag or, when they are all handed out,
// unknownTag, and returns its tag.
func (tg *tags) add(iv int64) uint64 {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	i := indexHome(iv)
	for ; tg.index[i].iv.Load() != 0; i = (i + 1) % indexSlots {
		if tg.index[i].iv.Load() == iv {
			return tg.index[i].tag.Load()
		}
	}
	if tg.used >= indexFull {
		tg.full.Store(true)
		return unknownTag
	}
	tag := uint64(unknownTag)
	if tg.n < unknownTag-1 {
		tg.n++
		tag = uint64(tg.n)
		tg.ivs[tag].Store(iv)
	}
	tg.index[i].tag.Store(tag) // before iv: a reader that sees iv sees its tag
	tg.index[i].iv.Store(iv)
	tg.used++
	return tag
}

// interval returns the interval of tag, 0 if unknown.
func (tg *tags) interval(tag uint64) int64 { return tg.ivs[tag&tagMask].Load() }

// tagged is the table key of hash h under tag.
func tagged(h, tag uint64) uint64 { return h&^tagMask | tag }

// rescale re-expresses the debt of time tat at now, measured in units of
// interval from, in units of a shorter interval to (a raised limit): the
// same units used, so the new headroom is there at once. The debt rounds
// up. A longer interval (a lowered limit) keeps the debt as it stands, the
// moment the key's bucket is full again: what was used stays owed, and is
// never counted at more units than the key took. An unknown interval (0)
// leaves the time as it stands too.
func rescale(tat, now, from, to int64) int64 {
	if from == 0 || to >= from || tat <= now {
		return tat
	}
	return now + mulDivCeil(tat-now, to, from) // at most tat-now
}

// other returns the slot of k's key under another tag that holds a state,
// or -1. A key has a state under one tag at most: only the lock moves it.
func (sl *slab) other(k uint64) int {
	if sl == nil {
		return -1
	}
	for i := sl.home(k); ; {
		switch v := sl.keys[i].Load(); {
		case v == 0:
			return -1
		case v != k && (v^k)&^tagMask == 0 && sl.tats[i].Load() != dead:
			return i
		}
		if i++; i == len(sl.keys) {
			i = 0
		}
	}
}

// move takes the state of k's key under another tag out of its slot, if it
// has one, and returns it in units of interval t; the caller holds the lock
// and stores the state under k. The holes of the old slot are dropped:
// their units were of the old interval (a lost refund only denies more).
func (sh *gshard) move(k uint64, t int64, tg *tags, now int64) (int64, bool) {
	sl := sh.slab.Load()
	j := sl.other(k)
	if j < 0 {
		return 0, false
	}
	from := sl.keys[j].Load()
	v, ok := sh.dropAt(sl, j) // and its holes
	if !ok {
		return 0, false
	}
	return rescale(v, now, tg.interval(from), t), true
}

// moves reports whether a request under interval t moves a state from
// slot key k to its own tag: when t is shorter than k's tag's interval. A
// state under an equal or shorter interval, or an unknown one, is read
// where it is, as it stands, and keeps its tag while it owes anything (so
// that requests under two limits in turn never move a debt back and forth,
// each move handing out the raise again); see adopt.
func (tg *tags) moves(k uint64, t int64) bool { return t < tg.interval(k) }

// adopt moves k's key's state from another tag to k, under the lock, before
// a locked operation on k, when a request under interval t moves it, or
// when it owes nothing by now (it is then dropped: the key starts afresh
// under its own tag).
func (sh *gshard) adopt(capacity int, k uint64, t int64, tg *tags, now int64) {
	sl := sh.slab.Load()
	if j := sl.other(k); j < 0 || !tg.moves(sl.keys[j].Load(), t) && sl.tats[j].Load() > now {
		return
	}
	if v, ok := sh.move(k, t, tg, now); ok && v > now {
		sh.insert(capacity, k, v, now)
	}
}

// resolve returns the slab and the slot of the state that a request under
// interval t for key k works on, after adopt: k's own, or one under a
// shorter interval's tag; -1 when the key has none. The caller holds the
// lock.
func (sh *gshard) resolve(capacity int, k uint64, t int64, tg *tags, now int64) (*slab, int) {
	sh.adopt(capacity, k, t, tg, now)
	sl := sh.slab.Load()
	if i := sl.find(k); i >= 0 && sl.tats[i].Load() != dead {
		return sl, i
	}
	return sl, sl.other(k)
}
