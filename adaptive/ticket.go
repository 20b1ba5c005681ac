package adaptive

import "time"

// The request path: a Ticket is taken by Acquire (or AcquireAt) and given
// back by Release (or ReleaseAt) with the request's outcome.

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
	if c := l.reject(limit); c <= rejectChecks || sampled(uint64(c), max(s, rejectShift)) {
		l.maybeClose(l.now())
	}
	return Ticket{}, false
}

// A rejection by Acquire closes a window that is due (maybeClose), which
// costs a clock reading: the first rejectChecks rejections counted on
// their stripe in a window do, and then one in 2^rejectShift (or fewer,
// as admissions are sampled). A window that only rejections could close
// closes at most that many rejections late: at the rate that takes, a
// moment.
const (
	rejectChecks = 16
	rejectShift  = 4
)

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
// rejections so far on its stripe.
func (l *Limiter) reject(limit int64) int64 {
	if l.peak.Load() < limit {
		l.peak.Store(limit) // demand reached the limit
	}
	return l.rejected.add()
}

// Release frees the slot and reports the request's outcome. The outcome
// of a request that is not Timed is not recorded: v may be anything, and
// the caller need not find it out.
func (t Ticket) Release(v Sample) {
	switch {
	case t.l == nil:
	case t.flags&ticketTimed == 0:
		t.l.inflight.Add(-1) // sampled out: a timed request stands for it
	default:
		t.release(t.l.now(), v)
	}
}

// Timed reports whether t's request is timed, and its outcome recorded:
// every request while the traffic is light, one in 2^k at high rates under
// Acquire (each standing for the 2^k), every request under AcquireAt.
func (t Ticket) Timed() bool { return t.flags&ticketTimed != 0 }

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
	case v == SampleDrop, v == SampleAbandoned && t.flags&ticketTimed != 0 && l.slow(rtt):
		// Only the timed requests' outcomes are recorded (and only a
		// timed abandoned request can be told slow): under Acquire's
		// sampling, one stands for 2^shift.
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
