package config

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// table maps keys to overrides with open addressing and linear probing, at
// most a quarter full: a miss most often ends at the first empty slot, a
// hit at the first slot, after one hash of the key. Each slot holds the
// high bits of its key's hash, so probes compare strings only on a likely
// hit. A table is built once, then only read.
//
// The hash is a cheap seeded multiply-mix, not a flood-proof one: the
// table's keys come from the rules file, not from clients, so a client's
// key costs at most the longest run of occupied slots, which a
// quarter-full table with a random seed keeps short.
type table struct {
	seed  uint64
	slots []slot // a power of two long
	keys  []string
	vals  []override
}

type slot struct {
	tag uint32 // the hash's high bits
	idx uint32 // 1 + the index in keys and vals; 0 for an empty slot
}

func newTable(n int) table {
	t := table{seed: rand.Uint64() | 1, keys: make([]string, 0, n), vals: make([]override, 0, n)}
	t.slots = make([]slot, slotsFor(n))
	return t
}

func slotsFor(n int) int {
	size := 8
	for size < 4*n {
		size *= 2
	}
	return size
}

// lookup returns key's override, nil when it has none.
func (t *table) lookup(key string) *override {
	h := hashKey(key, t.seed)
	tag, mask := uint32(h>>32), uint64(len(t.slots)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.idx == 0 {
			return nil
		}
		if s.tag == tag && t.keys[s.idx-1] == key {
			return &t.vals[s.idx-1]
		}
	}
}

// insert adds key's override v, unless key has one: then it returns that
// one and changes nothing.
func (t *table) insert(key string, v override) *override {
	if prev := t.lookup(key); prev != nil {
		return prev
	}
	if 4*(len(t.keys)+1) > len(t.slots) {
		t.grow()
	}
	t.keys, t.vals = append(t.keys, key), append(t.vals, v)
	t.place(key, uint32(len(t.keys)))
	return nil
}

func (t *table) place(key string, idx uint32) {
	h := hashKey(key, t.seed)
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].idx != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = slot{tag: uint32(h >> 32), idx: idx}
}

// hashKey mixes s, 8 bytes at a time, with seed.
func hashKey(s string, seed uint64) uint64 {
	const p0, p1 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	h := seed ^ uint64(len(s))*p0
	for len(s) > 8 {
		h = mix(h^binary.LittleEndian.Uint64([]byte(s[:8])), p1)
		s = s[8:]
	}
	var tail uint64
	switch {
	case len(s) == 8:
		tail = binary.LittleEndian.Uint64([]byte(s))
	case len(s) >= 4:
		tail = uint64(binary.LittleEndian.Uint32([]byte(s)))<<32 | uint64(binary.LittleEndian.Uint32([]byte(s[len(s)-4:])))
	case len(s) > 0:
		tail = uint64(s[0])<<16 | uint64(s[len(s)/2])<<8 | uint64(s[len(s)-1])
	}
	return mix(h^tail, p0)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (t *table) grow() {
	t.slots = make([]slot, 2*len(t.slots))
	for i, k := range t.keys {
		t.place(k, uint32(i+1))
	}
}
