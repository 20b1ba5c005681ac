// Package fieldval formats the values of the rate-limit response fields
// (RateLimit, RateLimit-Policy, X-RateLimit-*, Retry-After) and checks the
// policy names written in them. It formats numbers and names only: it
// knows no limiter, rule or store.
package fieldval

import (
	"math"
	"math/bits"
	"strings"
	"time"
	"unsafe"
)

// Seconds rounds d up to whole seconds, never below zero: delay-seconds.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// RefillSeconds is ceil(capacity*period/rate) in seconds, at least 1: the
// time an empty quota takes to refill, the w of a RateLimit-Policy member.
// It is computed exactly: for a valid limit the quotient fits in 64 bits,
// and anything larger is capped at math.MaxInt64.
func RefillSeconds(capacity int, period time.Duration, rate int) uint64 {
	if rate <= 0 || period <= 0 {
		return 1
	}
	hi, lo := bits.Mul64(uint64(max(capacity, 0)), uint64(period))
	d := uint64(rate) * uint64(time.Second)
	if hi >= d {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++
	}
	return max(q, 1)
}

// GCRANext is when the next unit of a GCRA key comes back, in nanoseconds:
// the key is full again after resetAfter and each of the capacity-remaining
// units missing takes interval, so the first of them is back after
// resetAfter less the time of the others. A full key (resetAfter 0) gives
// back a unit interval after one is taken. One multiplication: it is on
// the direct path of every allowed request.
func GCRANext(resetAfter, interval, capacity, remaining int64) int64 {
	return min(max(resetAfter-interval*(capacity-remaining-1), 0), max(resetAfter, interval))
}

// ValidName reports whether name can be used as a policy name: it is
// written as a Structured Fields string and used in metrics, so it is kept
// to 1–64 characters of letters, digits and "-_.:/".
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:/", c) >= 0) {
			return false
		}
	}
	return true
}

// Values holds the values of one response's rate-limit fields: the slices
// the header map points to and the bytes of the values formatted for this
// response, in a single allocation. It is sized for the default fields of
// a denial (five values, 160 bytes in all); legacy fields or long policy
// names spill into separate allocations.
type Values struct {
	Vals [5]string
	buf  [72]byte
	n    int // bytes of buf used
}

// Format appends the bytes written by f to the buffer and returns them as a
// string sharing the buffer's memory. The bytes are never written again, so
// the string is immutable like any other.
func (fs *Values) Format(f func([]byte) []byte) string {
	if fs.n == len(fs.buf) {
		return string(f(nil))
	}
	b := f(fs.buf[fs.n:fs.n:len(fs.buf)])
	if len(b) == 0 {
		return ""
	}
	if &b[0] != &fs.buf[fs.n] { // did not fit: append reallocated
		return string(b)
	}
	fs.n += len(b)
	return unsafe.String(&b[0], len(b))
}
