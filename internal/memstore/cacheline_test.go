package memstore

import (
	"testing"
	"unsafe"
)

// TestHotStateFillsWholeCacheLines: what every check reads and no check
// writes fills whole 64-byte cache lines, so that no object written on
// every request can share a line with it (see the root package's test of
// the same name).
func TestHotStateFillsWholeCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is sized for 64-bit platforms")
	}
	for _, c := range []struct {
		name string
		size uintptr
	}{
		{"Store", unsafe.Sizeof(Store{})},
		{"Prepared", unsafe.Sizeof(Prepared{})},
		{"slab", unsafe.Sizeof(slab{})},
		{"gshard", unsafe.Sizeof(gshard{})},
		{"wshard", unsafe.Sizeof(wshard{})},
		{"cshard", unsafe.Sizeof(cshard{})},
		{"slots", unsafe.Sizeof(slots{})},
		{"hotWindow", unsafe.Sizeof(hotWindow{})},
		{"logShard", unsafe.Sizeof(logShard{})},
		{"eventLog", unsafe.Sizeof(eventLog{})},
	} {
		if c.size%64 != 0 {
			t.Errorf("%s is %d bytes, not a multiple of 64", c.name, c.size)
		}
	}
}

// TestLockedWindowCheckWritesOneShardLine: a locked check of a window key
// that is not hot writes the shard's lock and last on its first cache line
// and, of the rest of the shard, nothing but a lowered floor (see store),
// so that checks of many keys on several cores move one line of the shard
// between them, not two.
func TestLockedWindowCheckWritesOneShardLine(t *testing.T) {
	var sh wshard
	line := func(off uintptr) uintptr { return off / 64 }
	if l := line(unsafe.Offsetof(sh.last)); l != 0 {
		t.Errorf("last is on line %d", l)
	}
	if l := line(unsafe.Offsetof(sh.shard) + unsafe.Offsetof(sh.mu)); l != 0 {
		t.Errorf("the lock is on line %d", l)
	}
	if unsafe.Sizeof(sh)%64 != 0 {
		t.Errorf("wshard is %d bytes, not a multiple of 64", unsafe.Sizeof(sh))
	}
}

// TestSlotCounterSharesItsLockLine: a Concurrency acquisition writes its
// shard's lock and slot counter, which lie on one cache line whatever the
// shard's place in its array (shards are not a multiple of 64 bytes long),
// so that an acquisition moves one line of its shard between cores, not
// two.
func TestSlotCounterSharesItsLockLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is sized for 64-bit platforms")
	}
	var sh shard[*slots]
	size, mu, seq := unsafe.Sizeof(sh), unsafe.Offsetof(sh.mu), unsafe.Offsetof(sh.seq)
	for i := range uintptr(64) { // every offset modulo 64 a shard can start at
		at := i * size % 64
		if (at+mu)/64 != (at+seq+unsafe.Sizeof(sh.seq)-1)/64 {
			t.Fatalf("shard %d (at %d modulo 64): its lock (offset %d) and slot counter (offset %d) are on two lines", i, at, mu, seq)
		}
	}
}

// TestHotQueueWritesOneLine: what an acquisition or a release of a hot
// Concurrency key writes in its queue (its lock, the returned box, the
// queue's bounds and counts, the last token) lies in one cache line: a
// queue is 64 bytes, an allocation of its own line.
func TestHotQueueWritesOneLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is sized for 64-bit platforms")
	}
	var q slots
	if end := unsafe.Offsetof(q.last) + unsafe.Sizeof(q.last); unsafe.Sizeof(q) != 64 || end > 64 {
		t.Fatalf("the queue is %d bytes, its written fields end at byte %d", unsafe.Sizeof(q), end)
	}
}

// TestHotWindowCountHasItsOwnLine: the count of a hot window key, which
// every check swaps, lies on another cache line than the key and window
// that every check reads, so that a check reading them after its swap
// does not take the line back from the core that swapped since.
func TestHotWindowCountHasItsOwnLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is sized for 64-bit platforms")
	}
	var c hotWindow
	count := unsafe.Offsetof(c.count) / 64
	for _, f := range []struct {
		name string
		off  uintptr
	}{
		{"h", unsafe.Offsetof(c.h)},
		{"end", unsafe.Offsetof(c.end)},
		{"period", unsafe.Offsetof(c.period)},
		{"prev", unsafe.Offsetof(c.prev)},
	} {
		if f.off/64 == count {
			t.Errorf("%s (offset %d) shares the count's line (offset %d)", f.name, f.off, unsafe.Offsetof(c.count))
		}
	}
	if unsafe.Sizeof(c)%64 != 0 {
		t.Errorf("hotWindow is %d bytes, not a multiple of 64", unsafe.Sizeof(c))
	}
}
