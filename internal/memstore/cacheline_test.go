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
