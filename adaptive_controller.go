package ratelimit

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// AdaptiveLimiter is one adaptive concurrency limit, the controller behind
// a Rule with Adaptive set, for callers outside net/http (a gRPC
// interceptor, a queue consumer). See Adaptive for the algorithm.
//
// The request path (Acquire and Release) is lock-free and allocation-free:
// an atomic in-flight counter compared with an atomically published limit,
// and a latency histogram of atomic counters. The request that closes a
// sample window runs the controller, under a flag that other requests skip.
//
// An AdaptiveLimiter is safe for concurrent use. Create one with
// NewAdaptiveLimiter; the zero value is not usable.
type AdaptiveLimiter struct {
	// Written by every request.
	inflight atomic.Int64
	_        [56]byte
	// Read by every request, written about once a window.
	limit    atomic.Int64
	low      atomic.Int64 // the limit for non-critical requests
	peak     atomic.Int64 // the highest in-flight count of this window
	winStart atomic.Int64 // ns since epoch
	// The first probeCount requests admitted are sampled apart: started
	// before any queue built, they give the first minimum RTT.
	probes atomic.Int64 // admissions still to mark as probes
	_      [24]byte
	// Written by drops, rejections and the controller.
	drops     atomic.Int64
	rejected  atomic.Int64
	busy      atomic.Bool
	minRTT    atomic.Int64
	sample    atomic.Int64
	last      atomic.Pointer[AdaptiveState]
	probeSlot atomic.Int64
	probeDone atomic.Int64
	probeRTT  [probeCount]atomic.Int64 // -1: not a success
	probeBase atomic.Int64
	hist      [numRTTBuckets]atomic.Uint32

	cfg      Adaptive
	rule     string
	key      string
	epoch    time.Time
	window   int64 // ns
	horizon  int64 // ns
	minCount int64
	land     float64 // a decrease lands this much above the queue-free point

	// Controller state, touched only by the holder of busy.
	lim      float64
	base     [2]int64 // the lowest window latencies of two half-horizons; 0: none
	baseAt   int64    // start of base[0]'s half-horizon
	lastCut  float64  // the ratio that cut the limit in the last window; 0: no cut
	lastPeak float64  // the last window's peak in flight
	windows  atomic.Int64
}

// NewAdaptiveLimiter returns a limiter configured by a; it panics on a bad
// configuration, like a Rule does.
func NewAdaptiveLimiter(a Adaptive) *AdaptiveLimiter {
	return newAdaptiveLimiter(a.normalized("adaptive"), "", "", time.Now())
}

// newAdaptiveLimiter builds a limiter from a normalized configuration;
// epoch is the time its windows count from.
func newAdaptiveLimiter(a Adaptive, rule, key string, epoch time.Time) *AdaptiveLimiter {
	l := &AdaptiveLimiter{
		cfg: a, rule: rule, key: key, epoch: epoch,
		window:   int64(a.Window),
		horizon:  int64(a.MinRTTHorizon),
		minCount: int64(a.MinSamples),
		lim:      float64(a.Initial),
		land:     1 + (a.Tolerance-1)/4,
	}
	l.probes.Store(probeCount)
	l.publish()
	return l
}

// NewAdaptiveLimiterAt is NewAdaptiveLimiter for a limiter that will only
// be given times (AcquireAt, ReleaseAt) from epoch on: a simulation's
// clock.
func NewAdaptiveLimiterAt(a Adaptive, epoch time.Time) *AdaptiveLimiter {
	return newAdaptiveLimiter(a.normalized("adaptive"), "", "", epoch)
}

// AdaptiveTicket is an admitted request's slot. Release it exactly once;
// the zero AdaptiveTicket's methods do nothing.
type AdaptiveTicket struct {
	l     *AdaptiveLimiter
	start time.Time
	probe bool
}

// Acquire admits one request if the number in flight is below the limit
// (below LowPriorityShare of it when critical is false).
func (l *AdaptiveLimiter) Acquire(critical bool) (AdaptiveTicket, bool) {
	return l.AcquireAt(time.Now(), critical)
}

// AcquireAt is Acquire at the time now, for simulations and tests; times
// need not be monotonic (a window never closes on a time before its start).
func (l *AdaptiveLimiter) AcquireAt(now time.Time, critical bool) (AdaptiveTicket, bool) {
	limit := l.limit.Load()
	if !critical {
		limit = l.low.Load()
	}
	n := l.inflight.Add(1)
	if n > limit {
		l.inflight.Add(-1)
		l.rejected.Add(1)
		if l.peak.Load() < limit {
			l.peak.Store(limit) // demand reached the limit
		}
		l.maybeClose(now)
		return AdaptiveTicket{}, false
	}
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	probe := l.probes.Load() > 0 && l.probes.Add(-1) >= 0
	return AdaptiveTicket{l: l, start: now, probe: probe}, true
}

// Release frees the slot and reports the request's verdict.
func (t AdaptiveTicket) Release(v Sample) { t.ReleaseAt(time.Now(), v) }

// ReleaseAt is Release at the time now. A success that ends before it
// started (a clock stepped back) is ignored rather than sampled.
func (t AdaptiveTicket) ReleaseAt(now time.Time, v Sample) {
	l := t.l
	if l == nil {
		return
	}
	l.inflight.Add(-1)
	rtt := now.Sub(t.start)
	if t.probe {
		l.recordProbe(rtt, v)
	}
	switch {
	case v == SampleDrop:
		l.drops.Add(1)
	case v == SampleSuccess && rtt >= 0:
		l.hist[rttBucket(rtt)].Add(1)
	}
	l.maybeClose(now)
}

// maybeClose runs the controller if the sample window is complete: at
// least Window long with MinSamples outcomes, or 10 Windows long.
func (l *AdaptiveLimiter) maybeClose(now time.Time) {
	t := int64(now.Sub(l.epoch))
	start := l.winStart.Load()
	age := t - start
	if age < l.window {
		return
	}
	if age < 10*l.window && l.drops.Load()+l.sampled() < l.minCount {
		return
	}
	if !l.busy.CompareAndSwap(false, true) {
		return
	}
	defer l.busy.Store(false)
	if l.winStart.Load() != start {
		return // closed by another request meanwhile
	}
	l.closeWindow(t)
}

// closeWindow takes the window's samples, adjusts the limit and starts the
// next window at t. The caller holds busy.
func (l *AdaptiveLimiter) closeWindow(t int64) {
	d, rej := l.drops.Swap(0), l.rejected.Swap(0)
	peak := l.peak.Swap(l.inflight.Load())
	lat, n := l.takeLatency()
	l.winStart.Store(t)
	l.windows.Add(1)
	l.adjust(t, n, d, peak, rej, lat)
	l.publish()
	st := l.State()
	st.Successes, st.Drops, st.Rejected = int(n), int(d), int(rej)
	l.last.Store(&st)
	if l.cfg.OnWindow != nil {
		l.cfg.OnWindow(st)
	}
}

// adjust is the control law; see Adaptive.
func (l *AdaptiveLimiter) adjust(t, n, d, peak, rej, lat int64) {
	lim := l.lim
	inUse := min(lim, float64(max(peak, 1)))
	cut := 0.0 // the latency ratio that made this window cut the limit
	switch {
	case n == 0 && d > 0: // only drops
		lim = inUse * 0.5
	case d > 0 && d*10 > n+d: // more than a tenth dropped
		lim = inUse * 0.8
	case n == 0 || lat == 0:
		// nothing sampled: no information
	default:
		base := l.learn(t, lat)
		l.sample.Store(lat)
		ratio := float64(lat) / float64(base)
		switch {
		case ratio > l.cfg.Tolerance && l.cutFailed(peak, ratio):
			// The last cut took effect and latency did not follow: it is
			// not our queue. The service got slower; relearn its RTT.
			l.base = [2]int64{lat, 0}
			l.baseAt = t
			l.minRTT.Store(lat)
		case ratio > l.cfg.Tolerance:
			lim = max(inUse/ratio*l.land, inUse*0.5)
			cut = ratio
		case float64(peak) >= lim*0.75 || rej > 0: // the limit is in use
			lim += max(1, lim/16)
		}
	}
	l.lastCut, l.lastPeak = cut, float64(peak)
	l.lim = min(max(lim, float64(l.cfg.Min)), float64(l.cfg.Max))
}

// cutFailed reports whether the previous window cut the limit for latency,
// the cut took effect for the whole of this window (whose peak includes
// the requests in flight when it began) with a quarter fewer requests in
// flight, and latency stayed as high.
func (l *AdaptiveLimiter) cutFailed(peak int64, ratio float64) bool {
	return l.lastCut > 0 && float64(peak) <= 0.75*l.lastPeak && ratio >= 0.9*l.lastCut
}

// learn folds a window's latency into the minimum RTT, kept as the lowest
// window latency of the current and the previous half-horizon, and
// returns it.
func (l *AdaptiveLimiter) learn(t, lat int64) int64 {
	if t-l.baseAt >= l.horizon/2 {
		l.base[1], l.base[0], l.baseAt = l.base[0], 0, t
	}
	if pb := l.probeBase.Swap(0); pb != 0 && (l.base[0] == 0 || pb < l.base[0]) {
		l.base[0] = pb
	}
	if l.base[0] == 0 || lat < l.base[0] {
		l.base[0] = lat
	}
	base := l.base[0]
	if l.base[1] != 0 {
		base = min(base, l.base[1])
	}
	l.minRTT.Store(base)
	return base
}

// probeCount is how many of the first requests give the first minimum RTT.
const probeCount = 8

// recordProbe records a probe's latency; the last one computes their
// median, the first minimum RTT.
func (l *AdaptiveLimiter) recordProbe(rtt time.Duration, v Sample) {
	if v != SampleSuccess || rtt < 0 {
		rtt = -1
	}
	i := l.probeSlot.Add(1) - 1
	if i >= probeCount {
		return // a ticket released twice
	}
	l.probeRTT[i].Store(int64(rtt))
	if l.probeDone.Add(1) != probeCount {
		return
	}
	var rtts []int64
	for i := range l.probeRTT {
		if v := l.probeRTT[i].Load(); v >= 0 {
			rtts = append(rtts, v)
		}
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		l.probeBase.Store(max(1, rtts[len(rtts)/2]))
	}
}

// publish stores the limits the request path compares with.
func (l *AdaptiveLimiter) publish() {
	lim := int64(math.Floor(l.lim))
	l.limit.Store(lim)
	l.low.Store(max(1, int64(math.Floor(l.lim*l.cfg.LowPriorityShare))))
}

// State returns a snapshot of the limit; the window counts are the last
// closed window's.
func (l *AdaptiveLimiter) State() AdaptiveState {
	st := AdaptiveState{Rule: l.rule, Key: l.key}
	if last := l.last.Load(); last != nil {
		st.Successes, st.Drops, st.Rejected = last.Successes, last.Drops, last.Rejected
	}
	st.Windows = l.windows.Load()
	st.Limit = int(l.limit.Load())
	st.InFlight = int(max(0, l.inflight.Load()))
	st.MinRTT = time.Duration(l.minRTT.Load())
	st.SampleRTT = time.Duration(l.sample.Load())
	return st
}

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

// sampled counts the successes of the window so far. Counting them in the
// histogram alone spares the request path a contended counter; the sum
// runs only once a window is old enough to close.
func (l *AdaptiveLimiter) sampled() int64 {
	var n int64
	for i := range l.hist {
		n += int64(l.hist[i].Load())
	}
	return n
}

// takeLatency empties the histogram and returns its typical latency, the
// mean of its fastest 90% (a median is blind to a queue that delays fewer
// than half of the requests; a plain mean is swayed by a few stragglers
// unrelated to load), and its count. 0, 0 when empty.
func (l *AdaptiveLimiter) takeLatency() (lat, n int64) {
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
