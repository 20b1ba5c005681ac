package adaptive

import (
	"math/bits"
	"time"
)

// The latency histogram: bucket 0 holds everything under 1024ns, then 16
// buckets per power of two (4.4% wide) up to 2^43ns (about 2.4 hours).
const (
	rttSubBits    = 4
	rttMinExp     = 10
	rttMaxExp     = 43
	numRTTBuckets = 1 + (rttMaxExp-rttMinExp)<<rttSubBits
)

func rttBucket(d time.Duration) int {
	v := uint64(d)
	if v < 1<<rttMinExp {
		return 0
	}
	e := bits.Len64(v) - 1
	if e >= rttMaxExp {
		return numRTTBuckets - 1
	}
	sub := int(v>>(e-rttSubBits)) & (1<<rttSubBits - 1)
	return 1 + (e-rttMinExp)<<rttSubBits + sub
}

// rttValue is the middle of bucket i.
func rttValue(i int) int64 {
	if i == 0 {
		return 1 << (rttMinExp - 1)
	}
	e := (i-1)>>rttSubBits + rttMinExp
	sub := int64((i - 1) & (1<<rttSubBits - 1))
	lo := (1<<rttSubBits + sub) << (e - rttSubBits)
	return lo + int64(1)<<(e-rttSubBits)/2
}

// takeLatency empties the histogram and returns its typical latency, the
// mean of its fastest 90% (a median is blind to a queue that delays fewer
// than half of the requests; a plain mean is swayed by a few stragglers
// unrelated to load), and its count. 0, 0 when empty.
func (l *Limiter) takeLatency() (lat, n int64) {
	var counts [numRTTBuckets]uint32
	var total uint64
	for i := range l.hist {
		if l.hist[i].Load() != 0 {
			counts[i] = l.hist[i].Swap(0)
			total += uint64(counts[i])
		}
	}
	if total == 0 {
		return 0, 0
	}
	keep := max(1, total*9/10)
	var seen uint64
	var sum float64
	for i, c := range counts {
		n := min(uint64(c), keep-seen)
		sum += float64(n) * float64(rttValue(i))
		if seen += n; seen == keep {
			break
		}
	}
	return max(1, int64(sum/float64(keep))), int64(total)
}
