// Package memstore is the in-process rate-limit engine behind the default
// store of package ratelimit and the public stores/memory package.
//
// It works on its own small types (times are Unix nanoseconds in int64) so
// that it can sit below package ratelimit without an import cycle.
package memstore

import (
	"math"
	"math/bits"
)

// Alg is the engine's counting algorithm. The adapters over the engine map
// stores.Algorithm onto it value by value, by name, not by number.
type Alg uint8

// The algorithms.
const (
	GCRA Alg = iota
	SlidingWindow
	FixedWindow
	Concurrency
	SlidingLog
)

// Limit is a validated limit: Rate events per Period nanoseconds with at
// most Capacity at once. Interval, if set, is Period/Rate rounded up;
// callers set it outside the store's locks so that no division happens
// under them.
type Limit struct {
	Rate     int64
	Period   int64
	Capacity int64
	Interval int64
}

// interval is Period/Rate rounded up: the time one unit takes to refill.
func (l Limit) interval() int64 {
	if l.Interval > 0 {
		return l.Interval
	}
	return (l.Period + l.Rate - 1) / l.Rate
}

// Result is the outcome of one check. Durations are in nanoseconds.
type Result struct {
	Allowed    bool
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
	Delay      int64  // for a reservation (Request.MaxDelay): the wait before acting
	Slot       uint64 // what an allowed take consumed: Concurrency slots, or the end of its window
	// Next, for the window algorithms, is the time until more than
	// Remaining units are available: the end of a fixed window, and for a
	// sliding window when the weighted count next drops by one. Zero for
	// GCRA, whose caller derives it from ResetAfter, and Concurrency.
	Next int64
}

// gcra applies cost at now to the theoretical arrival time tat of a key
// (zero for a key never seen) and returns the new tat to store.
func gcra(tat, now int64, l Limit, cost int64) (int64, Result) {
	r := &Request{Limit: l, Cost: cost}
	next, d := gcraDecide(tat, now, r)
	return next, d.result(now, r)
}

// gcraDecision is what gcraDecide settles under the shard lock; result
// turns it into a Result (with its divisions) after the lock is released.
type gcraDecision struct {
	allowed bool
	tat     int64 // the key's theoretical arrival time after the decision
	allowAt int64 // when the request fits, with no other traffic
}

// gcraDecide is the GCRA decision on r at now for a key at tat.
//
// The bucket is full when tat <= now and empty when tat = now + tau, where
// tau = Capacity*interval. A request of cost n fits at allowAt = tat +
// n*interval - tau: now, when allowAt <= now; later, as a reservation, when
// allowAt <= now + MaxDelay (its units are consumed at once, so that later
// requests queue behind it, and it acts at allowAt). Cost zero reports
// whether one unit fits and changes nothing. Forced requests go to
// gcraForce. (Kept small enough to inline into the lock-free check.)
func gcraDecide(tat, now int64, r *Request) (int64, gcraDecision) {
	t := r.Limit.interval()
	tat = max(tat, now)
	allowAt := tat + max(r.Cost, 1)*t - t*r.Limit.Capacity // Cost <= Capacity: no overflow
	if allowAt-now > r.MaxDelay {
		return tat, gcraDecision{tat: tat, allowAt: allowAt}
	}
	tat += r.Cost * t
	return tat, gcraDecision{allowed: true, tat: tat, allowAt: allowAt}
}

// result is the Result of decision d on r, Slot included.
func (d gcraDecision) result(now int64, r *Request) Result {
	var res Result
	d.write(now, r, &res)
	return res
}

// write is result, written into *res field by field (see windowResult for
// why a check's Result is better written where it lies than copied there).
func (d gcraDecision) write(now int64, r *Request, res *Result) {
	t := r.Limit.interval()
	res.Allowed = d.allowed
	res.Remaining = max(0, (now+t*r.Limit.Capacity-d.tat)/t)
	res.RetryAfter, res.Delay = 0, 0
	if !d.allowed {
		res.RetryAfter = d.allowAt - now
	} else if d.allowAt > now {
		res.Delay = d.allowAt - now
	}
	res.ResetAfter = d.tat - now
	res.Slot = d.slot(r)
	res.Next = 0
}

// slot is the Slot of an allowed take of non-zero cost: the key's time
// after it, the token that tells its refund whether it is still the latest
// reservation (see refund).
func (d gcraDecision) slot(r *Request) uint64 {
	if d.allowed && r.Cost > 0 {
		return uint64(d.tat)
	}
	return 0
}

// gcraForce applies forced request r (a settlement) at now to a key at
// tat: consumed whether or not it fits, the debt saturating about 73 years
// ahead of now. It returns the new time and the result, which reports
// whether the units fitted and, when not, when the next unit will.
func gcraForce(tat, now int64, r *Request) (int64, Result) {
	t := r.Limit.interval()
	tat = max(tat, now)
	fits := tat+mulSat(max(r.Cost, 1), t)-t*r.Limit.Capacity <= now
	next := min(tat+mulSat(r.Cost, t), now+math.MaxInt64/4)
	res := Result{
		Allowed:    fits,
		Remaining:  max(0, (now+t*r.Limit.Capacity-next)/t),
		ResetAfter: next - now,
	}
	if !fits {
		res.RetryAfter = max(0, next+t-t*r.Limit.Capacity-now)
	}
	if r.Cost > 0 {
		res.Slot = uint64(next)
	}
	return next, res
}

// mulSat is a*b for non-negative a and b, saturated at math.MaxInt64/4 so
// that sums of a few such values cannot overflow.
func mulSat(a, b int64) int64 {
	const ceiling = math.MaxInt64 / 4
	if hi, lo := bits.Mul64(uint64(a), uint64(b)); hi != 0 || lo > ceiling {
		return ceiling
	}
	return a * b
}

// window is the state of the counting algorithms: Expires is when the state
// becomes equivalent to an empty one (so that sweeps need no limit), and A, B
// are counts whose meaning depends on the algorithm.
type window struct {
	Expires int64
	A, B    uint32
}

func (w window) expiry() int64 { return w.Expires }

// slidingWindow: A is the count of the current window, B the count of the
// previous one, and the current window started at Expires - 2*Period.
//
// The estimated count at elapsed time e into the current window is
// A + B*(Period-e)/Period; a request of cost n fits when that plus n is at
// most Rate. All comparisons are exact (128-bit intermediate products).
//
// Time never goes back for a key: a request stamped before the start of the
// window the key counts in is decided at that start (the most conservative
// moment of the window), never in an earlier window that would forget the
// current count.
func slidingWindow(w window, now int64, l Limit, cost int64) (window, Result) {
	now = slidingNow(w, now, l.Period)
	return slidingWindowAt(w, now, now-mod(now, l.Period), l, cost)
}

// slidingWindowAt is slidingWindow with now already held to the key's
// window (slidingNow) and the start of the window now falls in.
func slidingWindowAt(w window, now, start int64, l Limit, cost int64) (window, Result) {
	p := l.Period
	cur, prev := slidingCounts(w, start, p)
	weighted := slidingWeighted(prev, now-start, p)
	res := windowResult(slidingDecide(cur, prev, weighted, start, now, l, cost, uint64(start+p)))
	if !res.Allowed {
		return w, res
	}
	return window{Expires: start + 2*p, A: uint32(cur + cost), B: uint32(prev)}, res
}

// slidingCounts is what a key at w counts in the window of period p that
// starts at start and in the one before it.
func slidingCounts(w window, start, p int64) (cur, prev int64) {
	switch w.Expires - 2*p {
	case start:
		return int64(w.A), int64(w.B)
	case start - p:
		return 0, int64(w.A)
	}
	return 0, 0
}

// slidingWeighted is the estimate of the previous window's count prev
// still within a period p that reaches e into the current window:
// ceil(prev*(p-e)/p).
func slidingWeighted(prev, e, p int64) int64 { return mulDivCeil(prev, p-e, p) }

// slidingDecide is the decision on a request of cost at now, which falls
// in the window that starts at start, for a key that counts cur in that
// window and prev in the one before, weighted now (slidingWeighted), as
// the fields of its Result (see windowResult); slot is the Slot of an
// allowed take (see takenSlot).
func slidingDecide(cur, prev, weighted, start, now int64, l Limit, cost int64, slot uint64) (allowed bool, remaining, retryAfter, resetAfter, next int64, taken uint64) {
	p := l.Period
	if !fits(cur+weighted, cost, l) {
		left := max(0, l.Rate-cur-weighted)
		return false, left,
			slidingRetryAfter(cur, prev, max(cost, 1), start, now, l),
			slidingResetAfter(cur, prev, start, now, p),
			slidingRetryAfter(cur, prev, left+1, start, now, l),
			0
	}
	cur += cost
	left := l.Rate - cur - weighted
	return true, left,
		0,
		slidingResetAfter(cur, prev, start, now, p),
		slidingRetryAfter(cur, prev, left+1, start, now, l), // more than left units fit once left+1 do
		takenSlot(cost, slot)
}

// slidingRetryAfter is how long until need units fit, with no other traffic.
//
// Because Rate-cur-need is an integer, ceil(prev*(p-e)/p) <= Rate-cur-need
// holds exactly when prev*(p-e) <= (Rate-cur-need)*p, that is when
// e >= p - floor((Rate-cur-need)*p/prev): no search is needed.
func slidingRetryAfter(cur, prev, need, start, now int64, l Limit) int64 {
	p := l.Period
	if free := l.Rate - cur - need; free >= 0 && prev > 0 {
		if e := p - mulDiv(free, p, prev); e < p {
			return max(start+e, now+1) - now
		}
	}
	// In the next window the current count becomes the previous one.
	e := int64(0)
	if cur > 0 {
		e = max(0, p-mulDiv(l.Rate-need, p, cur))
	}
	return start + p + e - now
}

func slidingResetAfter(cur, prev, start, now, p int64) int64 {
	switch {
	case cur > 0:
		return start + 2*p - now
	case prev > 0:
		return start + p - now
	}
	return 0
}

// slidingNow is now, or the start of the key's current window if later.
func slidingNow(w window, now, p int64) int64 {
	if w.A != 0 || w.B != 0 { // an empty state has no window to hold to
		now = max(now, w.Expires-2*p)
	}
	return now
}

// fixedWindow: A is the count of the window that ends at Expires. The window
// ends at end, or at the next epoch-aligned boundary when end is 0 (its
// start never matters: a count belongs to the window it expires with).
//
// Windows never go back: when the key already counts in a later window than
// the one now falls in (a request read the clock before another that was
// served first, or the clock was stepped back), the request counts against
// that later window. Only a later window starts a new count.
func fixedWindow(w window, now int64, l Limit, cost int64, end int64) (window, Result) {
	end, count := fixedCount(w, now, l.Period, end)
	res := windowResult(fixedDecide(count, max(0, end-now), l, cost, uint64(end)))
	if !res.Allowed {
		return w, res
	}
	return window{Expires: end, A: uint32(count + cost)}, res
}

// fixedCount is the end of the window a request at now counts in, for a
// key at w, and the key's count in it: see fixedWindow.
func fixedCount(w window, now, p, end int64) (int64, int64) {
	if end == 0 {
		end = now - mod(now, p) + p
	}
	if w.Expires == end || w.A > 0 && w.Expires > end {
		return w.Expires, int64(w.A)
	}
	return end, 0
}

// fixedDecide is the decision on a request of cost for a key that counts
// count in a window that ends in left nanoseconds, as the fields of its
// Result (see windowResult); slot is the Slot of an allowed take (see
// takenSlot).
func fixedDecide(count, left int64, l Limit, cost int64, slot uint64) (allowed bool, remaining, retryAfter, resetAfter, next int64, taken uint64) {
	if !fits(count, cost, l) {
		return false, max(0, l.Rate-count), left, left, left, 0
	}
	count += cost
	if count == 0 { // nothing counted: nothing to reset
		return true, l.Rate, 0, 0, left, 0
	}
	return true, l.Rate - count, 0, left, left, takenSlot(cost, slot)
}

// windowResult assembles the fields of a window's decision into its
// Result. The decisions return fields, not a Result, so that a check
// builds its Result once, where it returns it: the Go compiler keeps a
// Result (seven words) in memory, and copies it, with moves that stall
// on the stores that built it, at each call that passes one on.
func windowResult(allowed bool, remaining, retryAfter, resetAfter, next int64, slot uint64) Result {
	return Result{Allowed: allowed, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter, Next: next, Slot: slot}
}

// setWindow is windowResult written into *res field by field, for a
// caller that writes its Result where its own caller holds it
// (Prepared.TakeInto): a Result built elsewhere and copied into place is
// copied by 16-byte moves that wait for the 8-byte stores just made.
func (res *Result) setWindow(allowed bool, remaining, retryAfter, resetAfter, next int64, slot uint64) {
	res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter = allowed, remaining, retryAfter, resetAfter
	res.Delay, res.Slot, res.Next = 0, slot, next
}

// takenSlot is the Slot of an allowed take of cost in the window named
// slot: the slot, or none for a take of cost zero, which consumed nothing.
func takenSlot(cost int64, slot uint64) uint64 {
	if cost == 0 {
		return 0
	}
	return slot
}

// fits reports whether a request of cost fits under l a key that counts
// count (for a sliding window, with the previous window's weighted): a
// request of cost zero asks whether one unit would.
func fits(count, cost int64, l Limit) bool { return count+max(cost, 1) <= l.Rate }

// mod is the non-negative remainder of a/b (b > 0), so that windows align
// correctly for times before 1970 too.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// mulDiv returns floor(a*b/c) for non-negative a, b and positive c, with a
// 128-bit intermediate product. A quotient that does not fit in int64
// saturates to math.MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, math.MaxInt64))
}

// mulDivCeil returns ceil(a*b/c) under the same conditions as mulDiv.
func mulDivCeil(a, b, c int64) int64 {
	if a == 0 { // a sliding window's empty previous count: no division
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r != 0 {
		q++
	}
	return int64(q)
}
