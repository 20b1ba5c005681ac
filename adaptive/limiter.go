package adaptive

import (
	"math"
	"sync/atomic"
	"time"
)

// Limiter is one adaptive concurrency limit, the controller behind
// a Rule with Adaptive set, for callers outside net/http (a gRPC
// interceptor, a queue consumer). See Config for the algorithm.
//
// The request path (Acquire and Release) is lock-free and allocation-free:
// one atomic addition counts the request in and numbers it, and the count
// is compared with an atomically published limit.
// Latency is sampled: every request while the traffic is light, and once
// a window held more than twice max(256, 16×MinSamples) outcomes (512 by
// default: 5,120 requests a second with the default Window) one in 2^k of
// them, k ≤ 6, picked by their number, so that a window still holds about
// 256 samples; a window that samples four times that many (the first one,
// or a surge) halves its sampling at once, and at each further four times.
// Only the sampled requests read the clock (one monotonic reading each at
// Acquire and Release), and only their outcomes are recorded: each success
// counts in the latency histogram, and each success or drop counts for the
// 2^k requests it stands for (Ticket.Timed). Rejections are always counted.
// The timed request that closes a sample window runs the controller,
// under a flag that other requests skip.
//
// A Limiter is safe for concurrent use. Create one with
// New; the zero value is not usable.
type Limiter struct {
	// Written by every request.
	inflight atomic.Int64 // admissions<<32 | requests in flight: see admission
	peak     atomic.Int64 // the highest in-flight count of this window
	_        [48]byte
	// Read by every request, written about once a window.
	limit    atomic.Int64
	low      atomic.Int64  // the limit for non-critical requests
	winStart atomic.Int64  // ns since epoch
	shift    atomic.Uint32 // one request in 2^shift is sampled
	// The first probeCount requests admitted are sampled apart: started
	// before any queue built, they give the first minimum RTT.
	probes atomic.Int64 // admissions still to mark as probes
	_      [20]byte
	// Written by drops, rejections, sampled requests and the controller.
	drops     atomic.Int64
	successes atomic.Int64 // sampled successes of the window (the histogram's total)
	estimated atomic.Int64 // the window's successes: each sampled one counts 2^(its shift)
	busy      atomic.Bool
	minRTT    atomic.Int64
	sample    atomic.Int64
	last      atomic.Pointer[State]
	probeSlot atomic.Int64
	probeDone atomic.Int64
	probeRTT  [probeCount]atomic.Int64 // -1: not a success
	probeBase atomic.Int64
	hist      [numRTTBuckets]atomic.Uint32

	rejected rejections // the window's rejections

	cfg      Config
	rule     string
	key      string
	epoch    time.Time // with a monotonic reading, unless given by NewAt
	window   int64     // ns
	horizon  int64     // ns
	minCount int64
	target   int64   // sampled outcomes wanted per window before sampling thins out
	land     float64 // a decrease lands this much above the queue-free point

	// Controller state, touched only by the holder of busy.
	lim      float64
	base     [2]int64 // the lowest window latencies of two half-horizons; 0: none
	baseAt   int64    // start of base[0]'s half-horizon
	lastCut  float64  // the ratio that cut the limit in the last window; 0: no cut
	lastPeak float64  // the last window's peak in flight
	windows  atomic.Int64
}

// New returns a limiter configured by a; it panics on a bad
// configuration, like a Rule does.
func New(a Config) *Limiter {
	now := time.Now()
	return newLimiter(a.normalized("adaptive"), "", "", now, now)
}

// NewRule returns the limiter of one key of a rule, for middleware that
// keeps a limiter per key as ratelimit.Rule does: c is normalized (see
// Normalize, which panics naming rule), rule and key are reported in its
// State, its clock counts from epoch (shared by the rule's limiters, so
// that their times compare) and its first window starts at now.
func NewRule(c Config, rule, key string, epoch, now time.Time) *Limiter {
	return newLimiter(c.normalized(rule), rule, key, epoch, now)
}

// newLimiter builds a limiter from a normalized configuration;
// epoch is the time its clock counts from, now the start of its first
// window.
func newLimiter(a Config, rule, key string, epoch, now time.Time) *Limiter {
	l := &Limiter{
		cfg: a, rule: rule, key: key, epoch: epoch,
		window:   int64(a.Window),
		horizon:  int64(a.MinRTTHorizon),
		minCount: int64(a.MinSamples),
		target:   max(256, 16*int64(a.MinSamples)),
		lim:      float64(a.Initial),
		land:     1 + (a.Tolerance-1)/4,
	}
	t := int64(now.Sub(epoch))
	l.winStart.Store(t)
	l.baseAt = t
	l.probes.Store(probeCount)
	l.publish()
	return l
}

// NewAt is New for a limiter that will only
// be given times (AcquireAt, ReleaseAt) from epoch on: a simulation's
// clock. Its sampling is a function of the times given, so that a
// simulation is deterministic.
func NewAt(a Config, epoch time.Time) *Limiter {
	return newLimiter(a.normalized("adaptive"), "", "", epoch, epoch)
}

// Limit returns the current limit for critical requests: cheap enough to
// call on every request (fair.Config.SeatsFunc, for example).
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight returns the number of requests admitted and not yet released.
func (l *Limiter) InFlight() int { return int(l.inFlight()) }

// IdleAt reports whether, at now, the limiter has no request in flight
// and has closed no sample window for the longer of 10 Windows and
// MinRTTHorizon: it has seen no timed request for that long, what it
// learned is stale, and a limiter built in its place, starting from
// Initial, loses nothing that matters. A keyed rule that holds MaxKeys
// limiters drops an idle one to make room for a new key.
func (l *Limiter) IdleAt(now time.Time) bool {
	idle := max(10*l.window, l.horizon)
	return l.inFlight() <= 0 && int64(now.Sub(l.epoch))-l.winStart.Load() >= idle
}

// maybeClose runs the controller if the sample window is complete at t
// (ns since epoch): at least Window long with MinSamples outcomes, or 10
// Windows long.
func (l *Limiter) maybeClose(t int64) {
	start := l.winStart.Load()
	age := t - start
	if age < -l.window {
		// The clock stepped back by more than a window (times a little
		// out of order are only requests racing): the window restarts at
		// t, keeping its samples, rather than waiting for the clock to
		// reach its start again, with the limit frozen meanwhile.
		l.winStart.CompareAndSwap(start, t)
		return
	}
	if age < l.window {
		return
	}
	if age < 10*l.window && l.drops.Load()+l.successes.Load() < l.minCount {
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
func (l *Limiter) closeWindow(t int64) {
	d, rej := l.drops.Swap(0), l.rejected.take()
	l.successes.Store(0)
	peak := l.peak.Swap(l.inFlight())
	lat, _ := l.takeLatency()
	n := l.estimated.Swap(0) // the successes, estimated from the sampled ones
	l.winStart.Store(t)
	l.windows.Add(1)
	l.adjust(t, n, d, peak, rej, lat)
	l.publish()
	l.setShift(n + d)
	st := l.State()
	st.Successes, st.Drops, st.Rejected = int(n), int(d), int(rej)
	l.last.Store(&st)
	if l.cfg.OnWindow != nil {
		l.cfg.OnWindow(st)
	}
}

// adjust is the control law; see Config.
func (l *Limiter) adjust(t, n, d, peak, rej, lat int64) {
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
func (l *Limiter) cutFailed(peak int64, ratio float64) bool {
	return l.lastCut > 0 && float64(peak) <= 0.75*l.lastPeak && ratio >= 0.9*l.lastCut
}

// publish stores the limits the request path compares with.
func (l *Limiter) publish() {
	lim := int64(math.Floor(l.lim))
	l.limit.Store(lim)
	l.low.Store(max(1, int64(math.Floor(l.lim*l.cfg.LowPriorityShare))))
}

// State returns a snapshot of the limit; the window counts are the last
// closed window's.
func (l *Limiter) State() State {
	st := State{Rule: l.rule, Key: l.key}
	if last := l.last.Load(); last != nil {
		st.Successes, st.Drops, st.Rejected = last.Successes, last.Drops, last.Rejected
	}
	st.Windows = l.windows.Load()
	st.Limit = int(l.limit.Load())
	st.InFlight = int(max(0, l.inFlight()))
	st.MinRTT = time.Duration(l.minRTT.Load())
	st.SampleRTT = time.Duration(l.sample.Load())
	return st
}
