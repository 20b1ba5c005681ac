package ratelimitclient

import (
	"strings"
	"time"
)

// policy is the client's model of one server policy in one partition: how
// many sends are left before the quota is restored, and how far apart to
// space them so that they are spread over that time instead of sent at once.
//
// rem counts every request admitted since the response the state comes
// from, including those still waiting for their slot, so that queued
// requests are never given quota twice.
type policy struct {
	name     string
	rem      int64         // sends left before resetAt
	resetAt  mono          // when the server restores the quota
	interval time.Duration // spacing of sends
	last     mono          // slot of the latest admitted send, 0 before the first
	limit    int64         // the policy's quota, 0 when unknown
	window   time.Duration // the policy's window, 0 when unknown
	least    time.Duration // guessed window if the resets are rounded up
	exact    time.Duration // guessed window if they are not
	slack    time.Duration // how uncertain the server's clock was when resetAt was read
	r        int64         // the quota left by the response last applied
	epochs   int64         // greatest common divisor of the Unix-time resets seen
	seq      uint64        // sequence number of the response last applied
	maxGap   time.Duration // cap on the spacing: the Transport's MaxDelay
	active   bool          // a response gave the state above, not forgotten since at a reset
	bounded  bool          // resetAt is a response's bound, not extrapolated
	guessed  bool          // window is the longest reset seen, not given
	rounded  bool          // the quota grew before the reset it was announced for
	offClock bool          // the Unix-time resets fall off the ends of windows aligned on the clock
	logFit   bool          // a response showed the server counting no more sends than the log holds
	logOff   bool          // one showed it counting more: the log never paces p (see sendlog.go)
}

// known reports whether the policy's quota and window are known, which lets
// the client keep pacing at their average rate once the quota is spent.
func (p *policy) known() bool { return p.limit > 0 && p.window > 0 }

// avg is the average spacing the policy allows, at most maxGap.
func (p *policy) avg() time.Duration { return min(p.window/time.Duration(p.limit), p.maxGap) }

// apply updates the policy from q, reported by the response to the send
// numbered seq and received at now, when count sends have been admitted so
// far, and reports whether it did, and whether that made the policy faster
// (sooner): its window shorter, or its reset sooner than q says. A
// response older than the one last applied (responses to concurrent
// requests can arrive out of order) is ignored. No spacing exceeds maxGap.
//
// until, when not zero, is when the throttle the response is ends, by its
// Retry-After: a quota it reports spent is back then, when that is sooner
// than its reset (read from whole seconds, the reset can be a second late).
func (p *policy) apply(q *quota, seq, count uint64, now mono, maxGap time.Duration, until mono) (applied, sooner bool) {
	if p.active && seq < p.seq {
		return false, false
	}
	window := p.window
	resetAt := p.reset(q, now)
	p.active, p.bounded, p.seq, p.maxGap = true, true, seq, maxGap
	if q.limit > 0 {
		p.limit = q.limit
		p.learnWindow(q)
	}
	if p.known() && q.remaining == p.limit-1 && (!p.guessed || p.rounded || p.offClock && q.slack <= maxSlack) {
		// The response's own request found the quota full: a new window
		// began with it, and ends a window later however late the reset
		// reads (a reset rounded up to a whole second after a window that
		// began at the first request). A guessed window is trusted for it
		// when the resets are rounded up, or when they are Unix times off
		// the ends of windows aligned on the clock (the window is then the
		// whole seconds before them) and the server's clock is known to
		// within maxSlack, so that the guess is rarely a second short.
		resetAt = min(resetAt, now.add(p.window))
	}
	if until != 0 && q.remaining == 0 && until < resetAt {
		resetAt, sooner = until, true
	}
	p.rem = q.remaining - int64(min(count-seq, maxCount))
	p.resetAt, p.r = resetAt, q.remaining
	p.interval = 0
	if p.known() {
		p.interval = p.avg()
	}
	if p.rem > 0 {
		// Spread the sends left over the time left, after those queued, but
		// never slower than the policy's average rate: the quota left is
		// counted, so going on at that rate cannot overdraw it, and a reset
		// read late (rounded up, or receding as a bucket refills) would
		// otherwise slow every send.
		from := max(now, p.last)
		if span := p.resetAt.sub(from); span > 0 {
			if spread := span / time.Duration(p.rem); !p.known() || spread < p.interval {
				p.interval = spread
			}
		} else if !p.known() {
			p.interval = q.reset / time.Duration(p.rem)
		}
	}
	p.interval = min(p.interval, maxGap)
	return true, sooner || p.window < window
}

// reset returns when q, received at now, says the quota is restored. A
// reset read from whole seconds is late by up to a second: each response
// bounds the instant from above, and while the server's remaining count
// does not grow the window is the same one and the earliest bound holds.
// It notes when most of the quota came back well before the reset announced:
// the server rounds its resets up. (A smaller gain may be requests counted in
// another order than they were sent.)
func (p *policy) reset(q *quota, now mono) mono {
	bound := now.add(q.reset)
	if !p.active || !p.bounded {
		p.slack = q.slack
		return bound
	}
	if q.remaining-p.r > p.limit/2 && p.resetAt.sub(now) > p.slack+time.Second/4 {
		p.rounded = true
	}
	if q.remaining <= p.r && now < p.resetAt && p.resetAt < bound {
		return p.resetAt
	}
	p.slack = q.slack
	return bound
}

// learnWindow updates the window from q, which has a limit. A window the
// server gives is taken as is. Without one, the longest reset seen is a
// lower bound of it (the quota never takes longer than a window to
// restore): for a Unix-time reset, the seconds from the Date to it when the
// resets all fall on ends of windows aligned on the clock (their greatest
// common divisor is a multiple of it), and the whole seconds before it, at
// the latest the server's clock may read, when the server rounds them up.
func (p *policy) learnWindow(q *quota) {
	switch {
	case q.window > 0:
		p.window, p.guessed = q.window, false
	case p.window == 0 || p.guessed:
		p.least, p.exact = max(p.least, q.least), max(p.exact, q.exact)
		if q.epoch > 0 {
			p.epochs = gcd(p.epochs, q.epoch)
		}
		p.window, p.guessed = p.exact, true
		secs := int64(p.exact / time.Second)
		p.offClock = p.epochs > 0 && secs > 0 && p.epochs%secs != 0
		if p.rounded || p.offClock {
			p.window = p.least
		}
	}
}

// take returns when a send may happen, no earlier than at, and counts the
// send in p; base is the reset the send waits for, zero when it does not
// wait for one, so that the caller can add jitter. ok is false when the slot
// is more than a window past the reset: sends are not queued that far ahead
// on a picture that will be stale by then. logNext, when not zero, is the
// earliest time the partition's send log allows (see sendlog.go): a send
// waits for it, and once the log is known to fit the server, for it instead
// of the reset when the quota is spent. The caller
// takes from a copy of the policy and keeps it only if the send goes ahead.
func (p *policy) take(at, logNext mono) (slot, base mono, ok bool) {
	if !p.active {
		return at, base, true
	}
	if at >= p.resetAt { // the quota has been restored
		if !p.known() {
			p.active = false
			return at, base, true
		}
		p.rem, p.interval, p.resetAt, p.bounded = p.limit, p.avg(), at.add(p.window), false
	}
	if p.rem <= 0 {
		if !p.known() {
			// Wait for the reset. The send is not counted: its response
			// will tell the new quota.
			return p.resetAt, p.resetAt, true
		}
		// Quota spent but its rate known: from the reset, go on at the
		// policy's average rate.
		p.interval = p.avg()
		if at < p.resetAt && !(p.logFit && logNext != 0) {
			at, base = p.resetAt, p.resetAt
		}
	}
	slot = max(at, logNext)
	if p.last != 0 {
		slot = max(slot, p.last.add(p.interval))
	}
	if p.known() && slot > p.resetAt.add(p.horizon()) {
		return slot, base, false
	}
	p.rem--
	p.last = slot
	return slot, base, true
}

// horizon is how far past the reset sends are queued: a window, or, while
// the window is a guess that may be twice too long (a Unix-time reset read
// from one Date), the shortest it can be: sends queued at the pace of a
// window read too long keep their slots when the responses show it
// shorter.
func (p *policy) horizon() time.Duration {
	if p.guessed && !p.rounded && !p.offClock && p.least > 0 {
		return p.least
	}
	return p.window
}

// maxSlack is how uncertain the server's clock may be for a guessed window
// to end a window that began with a response (see apply).
const maxSlack = time.Second / 2

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// find returns the policy named name, adding it when there is room.
func find(ps *[]policy, name string) *policy {
	for i := range *ps {
		if (*ps)[i].name == name {
			return &(*ps)[i]
		}
	}
	if len(*ps) == maxItems {
		return nil
	}
	*ps = append(*ps, policy{name: strings.Clone(name)})
	return &(*ps)[len(*ps)-1]
}
