package ratelimitclient

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// ticket is a send reserve admitted: its sequence number, the slot to send
// at (zero when there is nothing to wait for), and its waiter when it waits
// on the server's policies (see replan.go), nil otherwise.
type ticket struct {
	seq  uint64
	slot mono
	w    *waiter
}

// reserve admits a send of req in partition p: it returns the send's
// ticket, with the send counted against every policy; or a *WaitError
// when the wait would not fit, with nothing counted. waited is how long the
// request has already waited.
func (t *Transport) reserve(req *http.Request, p *partition, attempt int, waited time.Duration) (ticket, error) {
	if !p.gated.Load() {
		return ticket{seq: p.count.Add(1)}, nil
	}
	now := t.now()
	p.mu.Lock()
	slot, res, ok := plan(p, now)
	wait := slot.sub(now)
	bound, byDeadline := t.bound(req, p, now, waited)
	exceeds := wait > bound || byDeadline && wait > 0 && wait >= bound
	if !ok || exceeds {
		if res != nil {
			res.CancelAt(p.localTime(now))
		}
		p.mu.Unlock()
		t.observe(Event{Kind: WouldWait, Partition: p.name, Wait: wait, Attempt: attempt})
		return ticket{}, &WaitError{Partition: p.name, Wait: wait, Bound: bound, Deadline: exceeds && byDeadline, queued: !exceeds}
	}
	p.commit()
	if p.ad != nil && p.ad.sched.on() && p.usesLocal() {
		p.ad.sched = p.ad.schedNew
	}
	tk := ticket{seq: p.count.Add(1), slot: slot}
	if p.log != nil {
		p.log.admit(tk.seq, now, max(slot, now))
	}
	if slot > now && len(p.policies) > 0 {
		tk.w = p.addWaiter(tk.seq, slot)
	}
	p.mu.Unlock()
	if slot <= now {
		tk.slot = 0 // nothing to wait for
	}
	return tk, nil
}

// plan computes when a send admitted at now may happen, with the policies as
// they will be once it is counted (in p.scratch) and the local limiter's
// reservation, if any; ok is false when a policy refuses to queue that far
// ahead. The caller holds p.mu.
//
// A send that waits for a throttle's end or a quota's reset is paced from
// that instant like any other, and then delayed by its own jitter, so that
// waiters resume spread over a fifth of their wait even when the pace alone
// would send them all at once. The jitter is not part of the pace: the sends
// after it are spaced from the unjittered slot, not from the latest jitter.
func plan(p *partition, now mono) (slot mono, res *rate.Reservation, ok bool) {
	at, base := now, mono(0)
	if p.blocked > now {
		at, base = p.blocked, p.blocked
	}
	slot, ok = at, true
	p.scratch = append(p.scratch[:0], p.policies...)
	for i := range p.scratch {
		var logNext mono
		if p.log != nil && p.scratch[i].logged() {
			logNext = p.log.next(p.scratch[i].limit, p.scratch[i].logWindow())
			if logNext == 0 {
				logNext = at // fewer sends than the quota in the log
			}
		}
		s, b, fits := p.scratch[i].take(at, logNext)
		ok = ok && fits
		slot = max(slot, s)
		if b > base && (s > b || !p.scratch[i].known()) {
			// The first send paced from a reset is on time: a window that
			// begins with its first request would begin late. The ones
			// after it are jittered, as are all those waiting for a reset
			// of unknown size (they are not paced).
			base = b
		}
	}
	if ok && p.ad != nil && p.ad.sched.on() && p.usesLocal() {
		// Windows read from the server: their slots spread the sends (see
		// schedule.go), and are not jittered.
		p.ad.schedNew = p.ad.sched
		at := slot
		wall := p.clock.wall(at)
		slot = at.add(p.ad.schedNew.take(wall, *p.clock.bounds.Load()).Sub(wall))
		if slot.sub(at).Seconds()*float64(p.ad.sched.quota) > aimdQueue*p.ad.sched.window.Seconds() {
			ok = false
		}
		return slot, nil, ok
	}
	if base > now && p.rate == 0 { // the adaptive mode paces its sends from a throttle's end
		slot = max(slot, base.add(jitter(base.sub(now))))
	}
	if ok && p.usesLocal() {
		res = p.local.ReserveN(p.localTime(slot), 1)
		d := res.DelayFrom(p.clock.wall(slot))
		slot = slot.add(d)
		if p.rate > 0 && d.Seconds()*p.rate > aimdQueue {
			ok = false // adaptive: not queued far on a rate that may be cut
		}
	}
	return slot, res, ok
}

// commit makes plan's result the state of p's policies. The slices are
// swapped, not copied: the former state's storage is plan's next scratch.
// The caller holds p.mu.
func (p *partition) commit() { p.policies, p.scratch = p.scratch, p.policies }

// jitter returns a random delay of up to a fifth of d, so that requests
// waiting for the same moment resume spread over a fifth of their wait
// instead of at once.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d/5) + 1))
}

// bound is the longest req may still wait at now in partition p: what is
// left of MaxWait, or the time to its context's deadline when that is
// shorter (byDeadline).
func (t *Transport) bound(req *http.Request, p *partition, now mono, waited time.Duration) (time.Duration, bool) {
	b := max(t.maxWait-waited, 0)
	if dl, ok := req.Context().Deadline(); ok {
		if left := dl.Sub(p.clock.wall(now)); left <= b {
			return max(left, 0), true
		}
	}
	return b, false
}

// wait blocks until the ticket's slot, or the slot replan gives the send
// instead (see replan.go), returning early with the context's error. If a
// throttle blocked the partition in the meantime, it admits the send again
// and waits for the new slot. It returns the send's sequence number.
//
// A wake takes the partition's lock once, to leave the waiting sends and
// see whether a throttle came; a send takes it besides only when replan
// moves its slot.
func (t *Transport) wait(req *http.Request, p *partition, attempt int, tk ticket) (uint64, error) {
	var waited time.Duration
	observed := false
	for tk.slot != 0 {
		var moved chan struct{} // nil when the send has no waiter: it is never moved
		if tk.w != nil {
			moved = tk.w.moved
			select {
			case <-moved: // moved since reserve
				tk.slot = p.slotOf(tk.w)
			default:
			}
		}
		d := tk.slot.sub(t.now())
		if d <= 0 {
			if later := t.wake(p, tk.w, tk.slot, nil); later != 0 {
				tk.slot = later
				continue
			}
			return tk.seq, nil
		}
		if !observed {
			t.observe(Event{Kind: Waited, Partition: p.name, Wait: d, Attempt: attempt})
			observed = true
		}
		start := time.Now()
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-moved:
			timer.Stop()
			waited += time.Since(start)
			tk.slot = p.slotOf(tk.w) // the slot replan gave it
			continue
		case <-req.Context().Done():
			timer.Stop()
			t.wake(p, tk.w, math.MaxInt64, nil) // it leaves, whatever its slot
			return 0, fmt.Errorf("ratelimit: %s: waiting for the rate limit: %w", p.name, req.Context().Err())
		}
		waited += d
		var blocked bool
		if later := t.wake(p, tk.w, tk.slot, &blocked); later != 0 {
			tk.slot = later // moved as its timer fired: select took the timer
			continue
		}
		if !blocked {
			return tk.seq, nil
		}
		var err error
		if tk, err = t.reserve(req, p, attempt, waited); err != nil {
			return 0, err
		}
		observed = false
	}
	return tk.seq, nil
}

// wake removes w, when not nil, from the waiting sends of p, once its
// slot, which the send last read as slot, has come, and sets *blocked (when
// not nil) to whether a throttle blocks p now. When replan has given w a
// later slot meanwhile (its signal and the send's timer came together, and
// the send's select took the timer), w stays among the waiting sends and
// wake returns that slot: the send waits for it, as replan counted it.
func (t *Transport) wake(p *partition, w *waiter, slot mono, blocked *bool) (later mono) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.work.locks++
	if w != nil && w.at >= 0 && w.slot > slot {
		return w.slot
	}
	p.leave(w)
	if blocked != nil {
		*blocked = p.blocked > t.now()
	}
	return 0
}
