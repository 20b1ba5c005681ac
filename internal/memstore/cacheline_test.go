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
