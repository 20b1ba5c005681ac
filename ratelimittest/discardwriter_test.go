package ratelimittest

import (
	"net/http"
	"testing"
	"unsafe"
)

// mapAt is the address of the runtime's header of h: a map value is a
// pointer to it.
func mapAt(h http.Header) uintptr { return *(*uintptr)(unsafe.Pointer(&h)) }

// Writers made one after the other, as a benchmark makes one per
// goroutine, have header maps on cache lines of their own: every request
// writes the map's runtime header, so two goroutines whose maps shared a
// line would measure their false sharing.
func TestWritersMadeInARowShareNoCacheLine(t *testing.T) {
	// The size of a map's runtime header, as allocated: the least distance
	// between empty maps made in a row.
	ms := make([]http.Header, 16)
	for i := range ms {
		ms[i] = make(http.Header)
	}
	size := ^uintptr(0)
	for i := range ms {
		for j := range ms {
			if d := mapAt(ms[j]) - mapAt(ms[i]); mapAt(ms[j]) > mapAt(ms[i]) && d < size {
				size = d
			}
		}
	}
	if size > 256 {
		t.Skipf("empty maps made in a row are at least %d bytes apart: not packed", size)
	}
	ws := make([]*DiscardWriter, 16)
	for i := range ws {
		ws[i] = NewDiscardWriter()
	}
	lines := map[uintptr]int{}
	for i, w := range ws {
		at := mapAt(w.Header())
		for l := at / 64; l <= (at+size-1)/64; l++ {
			if j, ok := lines[l]; ok && j != i {
				t.Fatalf("writers %d and %d have header maps on cache line %#x", j, i, l*64)
			}
			lines[l] = i
		}
	}
}
