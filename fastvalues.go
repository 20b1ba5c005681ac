package ratelimit

import (
	"sync/atomic"
	"unsafe"
)

// valueCache holds recent RateLimit values of a rule's allowed responses
// by the remaining count and delay they state, so that responses stating
// the same ones share one string instead of each formatting its own: the
// first request of many new clients, a hot key whose count cycles through
// a few values, keys far from their limit. It is direct-mapped: a value
// displaces the one in its slot.
//
// The zero value is an empty cache, safe for concurrent use. Entries are
// immutable once put.
type valueCache struct {
	slots [64]atomic.Pointer[rateLimitValue]
}

// rateLimitValue is the RateLimit value s of a response stating remaining
// and t under the cache's rule.
type rateLimitValue struct {
	remaining, t int64
	s            string
}

// allowed is the one allocation of an allowed response whose value is
// not cached: the two slices the header map points to (the response's
// own) and the bytes of the RateLimit value.
type allowed[B valueBuf] struct {
	vals [2]string
	buf  B
}

// valueBuf is the buffer of an allowed: sized so that with the two slices
// (32 bytes) the allocation fills a size class of the allocator (64, 80 or
// 96 bytes) when the value is not cached.
type valueBuf interface{ [32]byte | [48]byte | [64]byte }

// emptyBuf returns b as an empty slice with b's capacity.
func emptyBuf[B valueBuf](b *B) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(b)), len(*b))[:0]
}

// cachedAllowed is allowed with the entry put into the cache, which keeps
// the whole allocation alive; the response's slices in it are never read
// through the cache.
type cachedAllowed[B valueBuf] struct {
	allowed[B]
	v rateLimitValue
}

// admitValue reports whether a value that missed the cache, at time now
// (Unix nanoseconds), is to be put into it: for one time in 64, picked by
// a hash of now, so that a stream of values never seen again (a hot key
// counting down) costs a store into the cache, which every core reads, on
// one miss in 64 only, while a value that recurs is cached after some tens
// of misses. Which misses are cached changes what is allocated, never what
// a response says.
func admitValue(now int64) bool { return uint64(now)*0x9e3779b97f4a7c15>>58 == 0 }

func (c *valueCache) slot(remaining, t int64) *atomic.Pointer[rateLimitValue] {
	return &c.slots[uint64(remaining^t<<3)%uint64(len(c.slots))]
}

// get returns the cached value for remaining and t, or nil.
func (c *valueCache) get(remaining, t int64) *rateLimitValue {
	if v := c.slot(remaining, t).Load(); v != nil && v.remaining == remaining && v.t == t {
		return v
	}
	return nil
}

// put caches v, which must not change afterwards.
func (c *valueCache) put(v *rateLimitValue) {
	c.slot(v.remaining, v.t).Store(v)
}
