package memstore

import "math/bits"

// table is an open-addressing hash table from a non-zero 64-bit hash to V,
// with linear probing and backward-shift deletion (no tombstones). It grows
// by doubling up to a size fixed by the shard's bound, so that a shard full
// to its bound is at most 3/4 full: a GCRA key costs 16 bytes a slot, about
// 21 bytes a key at the bound, where a Go map, whose tables split by
// doubling, costs up to twice that. Indexes map a hash onto any table
// size by multiplication, so the last size need not be a power of two.
//
// A table is not safe for concurrent use; its shard's lock guards it.
type table[V any] struct {
	keys  []uint64 // 0 marks an empty slot
	vals  []V
	n     int
	limit int // the most slots the table grows to
	// removed counts the entries removed, so that whoever remembers it
	// knows whether an entry it saw may since have been removed and
	// inserted afresh (see wshard.giveBack).
	removed uint64
}

// loadNum/loadDen is the highest load a table reaches before it grows, and
// its load at its bound.
const loadNum, loadDen = 3, 4

// newTable returns a table that will hold up to bound entries.
func newTable[V any](bound int) table[V] {
	return table[V]{limit: max(8, bound*loadDen/loadNum+1)}
}

func (t *table[V]) len() int { return t.n }

// home is the slot where h's probe sequence starts. The high bits of h
// chose the shard, so they are the same for every key of a table: the slot
// comes from the low bits, rotated up for the multiplication.
func (t *table[V]) home(h uint64) int {
	hi, _ := bits.Mul64(bits.RotateLeft64(h, 32), uint64(len(t.keys)))
	return int(hi)
}

// find returns the slot holding h, or -1 (always for 0, which is no key).
func (t *table[V]) find(h uint64) int {
	if t.n == 0 || h == 0 {
		return -1
	}
	for i := t.home(h); ; {
		switch t.keys[i] {
		case h:
			return i
		case 0:
			return -1
		}
		if i++; i == len(t.keys) {
			i = 0
		}
	}
}

func (t *table[V]) get(h uint64) (V, bool) {
	if i := t.find(h); i >= 0 {
		return t.vals[i], true
	}
	var zero V
	return zero, false
}

// lookup returns the slot holding h and its value, or -1 and the zero
// value. The slot stays h's until the table is next changed.
func (t *table[V]) lookup(h uint64) (int, V) {
	if i := t.find(h); i >= 0 {
		return i, t.vals[i]
	}
	var zero V
	return -1, zero
}

// set stores v under h, growing the table if it must.
func (t *table[V]) set(h uint64, v V) {
	if i := t.find(h); i >= 0 {
		t.vals[i] = v
		return
	}
	if (t.n+1)*loadDen > len(t.keys)*loadNum && len(t.keys) < t.limit {
		t.grow(min(max(16, len(t.keys)+len(t.keys)/2), t.limit))
	}
	t.insert(h, v)
}

// insert places h, known to be absent, in the first free slot of its probe
// sequence. The table always keeps a free slot.
func (t *table[V]) insert(h uint64, v V) {
	i := t.home(h)
	for t.keys[i] != 0 {
		if i++; i == len(t.keys) {
			i = 0
		}
	}
	t.keys[i], t.vals[i] = h, v
	t.n++
}

func (t *table[V]) grow(size int) {
	keys, vals := t.keys, t.vals
	t.keys, t.vals, t.n = make([]uint64, size), make([]V, size), 0
	for i, k := range keys {
		if k != 0 {
			t.insert(k, vals[i])
		}
	}
}

// remove deletes h if present.
func (t *table[V]) remove(h uint64) {
	if i := t.find(h); i >= 0 {
		t.removeAt(i)
	}
}

// removeAt empties slot i and shifts back the entries after it that may
// move into the hole, so that every probe sequence stays unbroken.
func (t *table[V]) removeAt(i int) {
	n := len(t.keys)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		k := t.keys[j]
		if k == 0 {
			break
		}
		// The entry at j may fill hole i unless its home lies cyclically
		// in (i, j].
		if h := t.home(k); (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.keys[i], t.vals[i] = k, t.vals[j]
			i = j
		}
	}
	var zero V
	t.keys[i], t.vals[i] = 0, zero
	t.n--
	t.removed++
}

// sample calls f on up to n entries found from a pseudo-random slot picked
// by seed, looking at most 8n slots, or on to the first entry if those held
// none; f reports whether to go on. A table with an entry always yields
// one, so that a full table always finds one to evict.
func (t *table[V]) sample(seed uint64, n int, f func(h uint64, v V) bool) {
	if t.n == 0 {
		return
	}
	i := t.home(seed*0x9e3779b97f4a7c15 | 1)
	for look, found := 0, 0; found < n && (look < 8*n || found == 0); look++ {
		if k := t.keys[i]; k != 0 {
			found++
			if !f(k, t.vals[i]) {
				return
			}
		}
		if i++; i == len(t.keys) {
			i = 0
		}
	}
}
