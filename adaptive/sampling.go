package adaptive

import "math/bits"

// Sampling: which requests are timed and count in the latency histogram.

// sampled reports whether the request numbered c is one of the one in 2^s
// sampled: a multiplicative hash spreads them, so that no period of the
// traffic aliases with the sampling.
func sampled(c uint64, s uint32) bool {
	return s == 0 || c*0x9e3779b97f4a7c15>>(64-s) == 0
}

// sampleAt decides from the time t and the load whether a timed request
// is sampled: deterministic for a simulation, about one in 2^s.
func (l *Limiter) sampleAt(t int64, s uint32) uint8 {
	if s == 0 || (uint64(t)^uint64(l.inFlight())<<40)*0x9e3779b97f4a7c15>>(64-s) == 0 {
		return ticketSampled
	}
	return 0
}

// maxSampleShift bounds the sampling: at least one request in 64 is timed.
const maxSampleShift = 6

// setShift sets the sampling for the next window from the outcomes of
// this one: all of them when there were fewer than twice the target, else
// about one in 2^shift so that the target is still reached.
func (l *Limiter) setShift(outcomes int64) {
	s := 0
	if q := outcomes / l.target; q >= 2 {
		s = min(bits.Len64(uint64(q))-1, maxSampleShift)
	}
	l.shift.Store(uint32(s))
}

// thin samples half as many requests from now on, at most down to one in
// 2^maxSampleShift: a window has sampled four times the target already
// (the rate rose within it, or this is the first), and timing each request
// would cost the clock readings for nothing. The window's estimated
// successes count each sample for the sampling it was taken under.
func (l *Limiter) thin() {
	if s := l.shift.Load(); s < maxSampleShift {
		l.shift.CompareAndSwap(s, s+1)
	}
}
