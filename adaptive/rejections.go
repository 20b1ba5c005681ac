package adaptive

import (
	"sync/atomic"
	"unsafe"
)

// Rejections are counted in stripes, one cache line each: at the limit,
// requests rejected at once on several processors would otherwise all add
// to one counter, and the line holding it would move between their caches
// on every rejection. (An admission writes the in-flight count anyway; a
// rejection, like a full channel's, need write nothing else.)

// rejectStripes is the number of stripes, a power of two.
const rejectStripes = 8

// rejections is a count of rejections, striped.
type rejections [rejectStripes]struct {
	n atomic.Int64
	_ [56]byte
}

// add counts one rejection and returns its stripe's count. The stripe is
// picked by the address of the calling goroutine's stack: a goroutine
// keeps its stripe, and goroutines running at once on different
// processors (whose stacks are apart) mostly land on different stripes.
// Any stripe is correct; the choice only spreads the writes.
func (r *rejections) add() int64 {
	var here byte
	a := uint64(uintptr(unsafe.Pointer(&here))) >> 11 // stacks are at least 2 KiB apart
	return r[a*0x9e3779b97f4a7c15>>(64-3)].n.Add(1)
}

// take returns the count and restarts it from zero. Rejections counted
// meanwhile are counted either in it or in the next.
func (r *rejections) take() int64 {
	n := int64(0)
	for i := range r {
		n += r[i].n.Swap(0)
	}
	return n
}
