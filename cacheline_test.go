package ratelimit

import (
	"testing"
	"unsafe"
)

// TestHotStateFillsWholeCacheLines: what every request reads and no
// request writes is allocated in whole 64-byte cache lines (the allocator
// places an object whose size is a multiple of 64, and one of its size
// classes, on a line boundary), so that no other object shares a line with
// it. Were a small object written on every request (a response writer, a
// handler's own state) to land on the same line, each write would take the
// line from the cores reading it: one hot key, read by every core, then ran
// at half its speed in the parallel middleware benchmark, in some processes
// and not others, depending on where the allocator had put things.
func TestHotStateFillsWholeCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is sized for 64-bit platforms")
	}
	for _, c := range []struct {
		name string
		size uintptr
	}{
		{"handler", unsafe.Sizeof(handler{})},
		{"Limiter", unsafe.Sizeof(Limiter{})},
		{"rule", unsafe.Sizeof(rule{})},
		{"fastRule", unsafe.Sizeof(fastRule{})},
		{"denyFields", unsafe.Sizeof(denyFields{})},
		{"clockAnchor", unsafe.Sizeof(clockAnchor{})},
		{"valueRun", unsafe.Sizeof(valueRun{})},
	} {
		if c.size%64 != 0 {
			t.Errorf("%s is %d bytes, not a multiple of 64", c.name, c.size)
		}
	}
}
