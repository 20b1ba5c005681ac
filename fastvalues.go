package ratelimit

import (
	"bytes"
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
	run   atomic.Pointer[valueRun] // the values of a hot key's count: see valueRun
	_     [56]byte                 // run's store leaves the slots' lines alone
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

// valueRun is the RateLimit values of a run of remaining counts, hi down
// to lo, that state the same delay t: formatted back to back, each stride
// bytes, into one buffer that is never written again. A hot key counts
// down through its values one by one, each of them stated once, so that
// the cache's slots would miss on nearly every request; its responses
// share the run's values instead, and what each of them allocates is its
// own two slices. A value of the run keeps the whole buffer alive (a few
// kilobytes) as long as something holds it.
//
// A valueRun is immutable once published.
type valueRun struct {
	t, lo, hi int64
	stride    int
	buf       string    // hi's value first
	prev      *valueRun // the run before, for the counts still above hi, or nil
	_         [8]byte   // a whole cache line: see TestHotStateFillsWholeCacheLines
}

// runLen is the number of values of a run: what a hot key's responses
// use before one of them formats the next run.
const runLen = 32

// runAhead is how many counts of a run are left when the next one is
// formatted: enough for the other requests to state while one formats.
const runAhead = runLen / 4

// get returns the run's value for remaining and t, if it or the run before
// it has one.
func (v *valueRun) get(remaining, t int64) (string, bool) {
	if v == nil || v.t != t {
		return "", false
	}
	if remaining < v.lo || remaining > v.hi {
		if v = v.prev; v == nil || remaining < v.lo || remaining > v.hi {
			return "", false
		}
	}
	i := int(v.hi-remaining) * v.stride
	return v.buf[i : i+v.stride], true
}

// continues reports whether a value for remaining and t that v does not
// hold continues v's count: under the same delay, at most a run below it
// (the key counted past it). A value under another delay, or above the
// run (the key got some of its count back), starts no run by itself:
// a key whose values change delay, or climb, at every request would
// format a run for each.
func (v *valueRun) continues(remaining, t int64) bool {
	return v != nil && v.t == t && v.lo-runLen <= remaining && remaining < v.lo
}

// runValue returns the RateLimit value for remaining >= 0 and t from the
// rule's run. A key counting down formats its next run a few counts
// before the end of the present one, so that the run is there when its
// counts come, and formats a new run when its value is not in the present
// one but continues it, or follows, a count or two below, a value of the
// cache's slots (with the same delay: a window's end a second closer
// starts the next run from there). One request formats the new run while the others, which
// would only format the same values again, format their own (see
// pendingRun). It reports false, having done nothing, for any other value.
func (f *fastRule) runValue(remaining, t int64) (string, bool) {
	c := &f.values
	v := c.run.Load()
	if s, ok := v.get(remaining, t); ok {
		if remaining == v.lo+runAhead && v.lo > 0 { // one request of the run's counts
			next, before := f.newRun(v.lo-1, t), *v
			before.prev = nil // a run keeps one run alive, not all
			next.prev = &before
			c.run.CompareAndSwap(v, next)
		}
		return s, true
	}
	if v == pendingRun || !v.continues(remaining, t) && c.get(remaining+1, t) == nil && c.get(remaining+2, t) == nil {
		return "", false
	}
	if !c.run.CompareAndSwap(v, pendingRun) {
		return "", false // another request formats the run
	}
	v = f.newRun(remaining, t)
	c.run.Store(v)
	return v.buf[:v.stride], true
}

// pendingRun stands in for a run that a request is formatting: it holds no
// value and continues none.
var pendingRun = &valueRun{lo: 1, hi: -1 - runLen}

// newRun formats the run of values from hi down, as many of runLen as have
// as many digits as hi: copies of hi's value, each with its own count,
// whose digits differ from hi's in the last few only.
func (f *fastRule) newRun(hi, t int64) *valueRun {
	var first [96]byte
	b := f.appendValue(first[:0], hi, t)
	d := exactDigits(hi)
	lo := max(0, hi-runLen+1)
	if d > 1 {
		lo = max(lo, pow10(d-1))
	}
	buf := bytes.Repeat(b, int(hi-lo+1)) // not cleared first
	stride, end := len(b), len(f.quotedR)+d
	for k, i := int64(1), stride; i < len(buf); k, i = k+1, i+stride {
		// count and hi have d digits: those left of the last that
		// differ are the same
		count, h := hi-k, hi
		for j := i + end - 1; count != h; j-- {
			buf[j] = byte('0' + count%10)
			count, h = count/10, h/10
		}
	}
	return &valueRun{t: t, lo: lo, hi: hi, stride: stride, buf: unsafe.String(&buf[0], len(buf))}
}

// exactDigits is the number of decimal digits of n >= 0.
func exactDigits(n int64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// pow10 is 10 to the power d, for d < 19.
func pow10(d int) int64 {
	p := int64(1)
	for range d {
		p *= 10
	}
	return p
}
