package adaptive

import (
	"math"
	"math/bits"
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
// Acquire and Release) and count in the latency histogram; each counts for
// the 2^k requests it stands for. Drops are always counted.
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
	rejected  atomic.Int64
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

// Ticket is an admitted request's slot. Release it exactly once;
// the zero Ticket's methods do nothing.
type Ticket struct {
	l     *Limiter
	start int64 // ns since the limiter's epoch, when timed
	flags uint8
	shift uint8 // the sampling when it was admitted: a sampled outcome stands for 2^shift
}

// The flags of an Ticket.
const (
	ticketTimed   = 1 << iota // start is set
	ticketSampled             // its latency goes in the histogram (implies timed)
	ticketProbe               // one of the first requests (implies sampled)
	ticketThinned             // timed because sampled (Acquire): a timed outcome stands for 2^shift
)

// Acquire admits one request if the number in flight is below the limit
// (below LowPriorityShare of it when critical is false).
func (l *Limiter) Acquire(critical bool) (Ticket, bool) {
	limit := l.limitFor(critical)
	s := l.shift.Load()
	if l.inFlight() < limit { // at the limit, a rejection writes nothing it shares with admissions
		v := l.inflight.Add(admission | 1)
		if n := int64(int32(v)); n <= limit {
			var t int64
			var flags uint8
			if sampled(uint64(v>>32), s) {
				t, flags = l.now(), ticketTimed|ticketSampled|ticketThinned
			}
			return l.admit(n, t, flags, s), true
		}
		l.inflight.Add(-1)
	}
	if c := l.reject(limit); sampled(uint64(c), s) {
		l.maybeClose(l.now())
	}
	return Ticket{}, false
}

// sampled reports whether the request numbered c is one of the one in 2^s
// sampled: a multiplicative hash spreads them, so that no period of the
// traffic aliases with the sampling.
func sampled(c uint64, s uint32) bool {
	return s == 0 || c*0x9e3779b97f4a7c15>>(64-s) == 0
}

// AcquireAt is Acquire at the time now, for simulations and tests; times
// need not be monotonic (a window never closes on a time before its start).
func (l *Limiter) AcquireAt(now time.Time, critical bool) (Ticket, bool) {
	t := int64(now.Sub(l.epoch))
	s := l.shift.Load()
	flags := ticketTimed | l.sampleAt(t, s)
	limit := l.limitFor(critical)
	if l.inFlight() < limit {
		if n := int64(int32(l.inflight.Add(admission | 1))); n <= limit {
			return l.admit(n, t, flags, s), true
		}
		l.inflight.Add(-1)
	}
	l.reject(limit)
	l.maybeClose(t)
	return Ticket{}, false
}

// admission is what admitting a request adds to inflight, beside the one
// it adds to the requests in flight: inflight holds both counts, the
// admissions (wrapping) in its upper 32 bits, so that the one atomic
// addition that counts a request in also numbers it for sampling, without
// a random draw.
const admission = 1 << 32

// inFlight returns the number of requests in flight: the lower 32 bits of
// inflight, signed (a Ticket released twice takes it below zero; the borrow
// only moves the admissions' count, which nothing compares).
func (l *Limiter) inFlight() int64 { return int64(int32(l.inflight.Load())) }

// now reads the limiter's clock: one monotonic reading.
func (l *Limiter) now() int64 { return int64(time.Since(l.epoch)) }

// sampleAt decides from the time t and the load whether a timed request
// is sampled: deterministic for a simulation, about one in 2^s.
func (l *Limiter) sampleAt(t int64, s uint32) uint8 {
	if s == 0 || (uint64(t)^uint64(l.inFlight())<<40)*0x9e3779b97f4a7c15>>(64-s) == 0 {
		return ticketSampled
	}
	return 0
}

// limitFor returns the limit a request of that criticality is held to.
func (l *Limiter) limitFor(critical bool) int64 {
	if critical {
		return l.limit.Load()
	}
	return l.low.Load()
}

// admit lets in a request that made n in flight; t is the time (ns since
// epoch) when flags has ticketTimed, s the sampling shift it was decided
// under.
func (l *Limiter) admit(n, t int64, flags uint8, s uint32) Ticket {
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	if flags&ticketSampled != 0 && l.probes.Load() > 0 && l.probes.Add(-1) >= 0 {
		flags |= ticketProbe
	}
	return Ticket{l: l, start: t, flags: flags, shift: uint8(s)}
}

// reject counts a request rejected at limit and returns the window's
// rejections so far.
func (l *Limiter) reject(limit int64) int64 {
	if l.peak.Load() < limit {
		l.peak.Store(limit) // demand reached the limit
	}
	return l.rejected.Add(1)
}

// Release frees the slot and reports the request's outcome.
func (t Ticket) Release(v Sample) {
	switch {
	case t.l == nil:
	case t.flags&ticketTimed == 0 && v != SampleDrop:
		t.l.inflight.Add(-1) // not sampled: nothing to record
	default:
		t.release(t.l.now(), v)
	}
}

// ReleaseAt is Release at the time now. A success that ends before it
// started (a clock stepped back) is ignored rather than sampled.
func (t Ticket) ReleaseAt(now time.Time, v Sample) {
	if t.l != nil {
		t.release(int64(now.Sub(t.l.epoch)), v)
	}
}

// ElapsedAt is how long the request has been admitted at now, or -1 if it
// was acquired without reading the clock (Acquire at a sampled-out moment).
func (t Ticket) ElapsedAt(now time.Time) time.Duration {
	if t.l == nil || t.flags&ticketTimed == 0 {
		return -1
	}
	return time.Duration(int64(now.Sub(t.l.epoch)) - t.start)
}

// release frees the slot at now (ns since epoch) and records the outcome.
func (t Ticket) release(now int64, v Sample) {
	l := t.l
	l.inflight.Add(-1)
	rtt := time.Duration(now - t.start)
	if t.flags&ticketProbe != 0 {
		l.recordProbe(rtt, v)
	}
	switch {
	case v == SampleDrop:
		l.drops.Add(1)
	case v == SampleAbandoned && t.flags&ticketTimed != 0 && l.slow(rtt):
		// Only the timed abandoned requests can be told slow: under
		// Acquire's sampling, one stands for 2^shift.
		w := int64(1)
		if t.flags&ticketThinned != 0 {
			w <<= t.shift
		}
		l.drops.Add(w)
	case v == SampleSuccess && t.flags&ticketSampled != 0 && rtt >= 0:
		l.hist[rttBucket(rtt)].Add(1)
		l.estimated.Add(1 << t.shift)
		if c := l.successes.Add(1); c%(4*l.target) == 0 {
			l.thin()
		}
	}
	l.maybeClose(now)
}

// slow reports whether rtt, the latency of a request its caller abandoned,
// already exceeds Tolerance times the minimum RTT: only then does it say
// something of the server, that it was too slow for its callers, a drop
// (see SampleAbandoned).
func (l *Limiter) slow(rtt time.Duration) bool {
	m := l.minRTT.Load()
	return m > 0 && float64(rtt) > float64(m)*l.cfg.Tolerance
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
	d, rej := l.drops.Swap(0), l.rejected.Swap(0)
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
