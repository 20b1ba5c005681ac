package redisstore

import (
	"math"
	"sync/atomic"
)

// The hot-key detector counts checks per key in a count-min sketch with
// conservative update: sketchDepth rows of sketchWidth 32-bit counters,
// 64 KiB in all, whatever the number of keys. A key's estimate is the
// smallest of its row counters. It never underestimates the key's count
// since the last reset, and with conservative update (a row counter is
// raised only up to the new estimate) it overestimates a key only by checks
// of other keys that share a counter with it in every row.
//
// Why not a library: the well-known Go sketches are either unmaintained,
// not safe for concurrent use, or part of a much larger module; this one is
// a few lines over sync/atomic, lock-free on the check path.

const (
	sketchDepth = 4
	sketchWidth = 4096 // a power of two: a row index is 12 bits of the hash
	// sketchBytes is the detector's memory, independent of the key count.
	sketchBytes = sketchDepth * sketchWidth * 4
)

type sketch struct {
	rows [sketchDepth][sketchWidth]atomic.Uint32
}

// sketchIndex returns the counter of hash h in row r: each row reads its own 16
// bits of h.
func sketchIndex(h uint64, r int) uint32 {
	return uint32(h>>(16*r)) & (sketchWidth - 1)
}

// add counts one check of the key of hash h and returns its new estimate.
// Concurrent adds of one key may each raise the counters once; the
// estimate then lags by the concurrent adds, and never exceeds the sum of
// the true counts sharing its counters.
func (s *sketch) add(h uint64) uint32 {
	m := uint32(math.MaxUint32)
	for r := range sketchDepth {
		m = min(m, s.rows[r][sketchIndex(h, r)].Load())
	}
	if m == math.MaxUint32 {
		return m // saturated
	}
	n := m + 1
	for r := range sketchDepth {
		c := &s.rows[r][sketchIndex(h, r)]
		for {
			v := c.Load()
			if v >= n || c.CompareAndSwap(v, n) {
				break
			}
		}
	}
	return n
}

// estimate returns the estimate of the key of hash h.
func (s *sketch) estimate(h uint64) uint32 {
	m := uint32(math.MaxUint32)
	for r := range sketchDepth {
		m = min(m, s.rows[r][sketchIndex(h, r)].Load())
	}
	return m
}

// reset sets every counter to zero: the start of a detection window.
func (s *sketch) reset() {
	for r := range s.rows {
		for i := range s.rows[r] {
			s.rows[r][i].Store(0)
		}
	}
}
