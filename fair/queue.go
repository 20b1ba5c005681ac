package fair

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// queueState is one of a level's queues: the waiters of the flows dealt it,
// first come first served among themselves.
type queueState struct {
	waiters   []*waiter
	start     float64 // virtual start of its next dispatch, in seat-seconds
	executing int     // requests it dispatched that are still served
}

// waiter is a request waiting for a seat. granted and grantedAt are
// guarded by Scheduler.mu; ready is closed when the seat is granted.
type waiter struct {
	ready     chan struct{}
	granted   bool
	grantedAt time.Time
	queue     int
	flow      uint64  // the flow key's hash
	est       float64 // the service time charged at dispatch, seconds
}

// wait is Admit's contended path: r joins the shortest queue of its flow's
// hand and waits for a seat, MaxWait, or the end of its context.
func (f *Scheduler) wait(w http.ResponseWriter, r *http.Request, lv *levelState) (func(), bool) {
	start := time.Now()
	key := ""
	if lv.Flow != nil {
		if k, err := lv.Flow(r); err == nil {
			key = k
		}
	}
	h := flowHash(key)
	ctx := r.Context()
	limit := f.maxWait
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, dl.Sub(start))
	}
	ev := Event{Level: lv.Name, Flow: key, Request: r}

	f.mu.Lock()
	ev.Queue = lv.queueOf(h)
	if qlen := len(lv.queues[ev.Queue].waiters); qlen >= lv.QueueLength || limit <= 0 || ctx.Err() != nil {
		status, ra := 503, lv.retryAfter(0)
		ev.Outcome = TimedOut
		switch {
		case qlen >= lv.QueueLength:
			status, ev.Outcome, ra = 429, QueueFull, lv.retryAfter(qlen)
		case ctx.Err() == context.Canceled:
			ev.Outcome = Canceled
		}
		f.mu.Unlock()
		return f.refuse(w, lv, status, ra, ev)
	}
	wt := &waiter{ready: make(chan struct{}), flow: h}
	lv.enqueue(ev.Queue, wt)
	f.queued++
	f.dispatch()
	f.mu.Unlock()

	select {
	case <-wt.ready:
		return f.admitted(lv, wt, start, ev)
	default:
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	ev.Outcome = TimedOut
	select {
	case <-wt.ready:
		return f.admitted(lv, wt, start, ev)
	case <-ctx.Done():
		ev.Outcome = Canceled
	case <-timer.C:
	}
	now := time.Now()
	f.mu.Lock()
	if wt.granted && ev.Outcome == TimedOut {
		f.mu.Unlock() // the seat came as the time ran out: keep it
		return f.admitted(lv, wt, start, ev)
	}
	if wt.granted { // the context ended as the seat came: hand it on
		q := &lv.queues[wt.queue]
		q.executing--
		q.start = max(q.start-wt.est, lv.vtime) // refund the unused service
		f.free(lv)
		f.dispatch()
	} else {
		lv.remove(wt)
		f.queued--
	}
	ra := lv.retryAfter(0)
	f.mu.Unlock()
	ev.Wait = now.Sub(start)
	return f.refuse(w, lv, 503, ra, ev)
}

// admitted reports a waiter's admission and returns its done function.
func (f *Scheduler) admitted(lv *levelState, wt *waiter, start time.Time, ev Event) (func(), bool) {
	ev.Outcome = Admitted
	ev.Wait = wt.grantedAt.Sub(start)
	f.observe(ev)
	return func() { f.release(lv, wt) }, true
}

// refuse writes a 429 or 503 with its Retry-After and problem body.
func (f *Scheduler) refuse(w http.ResponseWriter, lv *levelState, status int, retry int64, ev Event) (func(), bool) {
	ev.RetryAfter = time.Duration(retry) * time.Second
	f.observe(ev)
	h := w.Header()
	h["Retry-After"] = []string{strconv.FormatInt(retry, 10)}
	h["Content-Type"] = []string{"application/problem+json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	if status == 429 {
		w.Write(lv.problem429)
	} else {
		w.Write(lv.problem503)
	}
	return noop, false
}

// release frees a seat taken by an admission (wt is nil on the uncontended
// path) and hands it on.
func (f *Scheduler) release(lv *levelState, wt *waiter) {
	var now time.Time
	if wt != nil {
		now = time.Now()
	}
	f.mu.Lock()
	f.free(lv)
	if wt != nil {
		lv.charge(wt, now)
	}
	f.dispatch()
	f.mu.Unlock()
}

// queueOf returns the queue a request of the flow with hash h joins: the
// queue where the flow already waits, so that a flow holds one queue's
// worth of fair share however much it sends; otherwise the shortest queue
// of its hand. Scheduler.mu is held.
func (lv *levelState) queueOf(h uint64) int {
	if fl, ok := lv.flows[h]; ok {
		return fl.queue
	}
	var hand [maxHand]int
	n := deal(h, lv.Queues, lv.HandSize, &hand)
	return lv.shortest(hand[:n])
}

// shortest returns the queue of hand with the fewest waiting and executing
// requests (the first of equals). Scheduler.mu is held.
func (lv *levelState) shortest(hand []int) int {
	best, bestLen := hand[0], int(^uint(0)>>1)
	for _, q := range hand {
		if l := len(lv.queues[q].waiters) + lv.queues[q].executing; l < bestLen {
			best, bestLen = q, l
		}
	}
	return best
}

// enqueue appends wt to queue qi. A queue that was empty starts no
// earlier than the level's virtual time: a flow earns no credit for the
// time it sent nothing. When nothing of the level is waiting, the virtual
// time first catches up with every queue, so that flows start each
// congestion episode even. Scheduler.mu is held.
func (lv *levelState) enqueue(qi int, wt *waiter) {
	if lv.queued == 0 {
		lv.vtime = max(lv.vtime, lv.maxStart)
	}
	q := &lv.queues[qi]
	if len(q.waiters) == 0 {
		q.start = max(q.start, lv.vtime)
	}
	wt.queue = qi
	q.waiters = append(q.waiters, wt)
	lv.queued++
	lv.flows[wt.flow] = flowState{queue: qi, waiting: lv.flows[wt.flow].waiting + 1}
}

// unwait counts wt out of its flow's waiters. Scheduler.mu is held.
func (lv *levelState) unwait(wt *waiter) {
	lv.queued--
	if fl := lv.flows[wt.flow]; fl.waiting <= 1 {
		delete(lv.flows, wt.flow)
	} else {
		fl.waiting--
		lv.flows[wt.flow] = fl
	}
}

// dequeue removes and returns the head of the queue with the earliest
// virtual finish time (its virtual start plus the level's observed service
// time, the same for every queue: so the earliest start), charges that
// queue the estimate and advances the level's virtual time to the start.
// lv.queued > 0. Scheduler.mu is held.
func (lv *levelState) dequeue() *waiter {
	best := -1
	for i := range lv.queues {
		q := &lv.queues[i]
		if len(q.waiters) == 0 {
			continue
		}
		if best < 0 || q.start < lv.queues[best].start ||
			q.start == lv.queues[best].start && len(q.waiters) < len(lv.queues[best].waiters) {
			best = i
		}
	}
	q := &lv.queues[best]
	wt := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	if len(q.waiters) == 0 {
		q.waiters = q.waiters[:0:0] // let the backing array go
	}
	q.executing++
	lv.unwait(wt)
	lv.vtime = max(lv.vtime, q.start)
	wt.est = lv.svc
	q.start += wt.est
	lv.maxStart = max(lv.maxStart, q.start)
	return wt
}

// remove takes a waiter that gave up out of its queue. Scheduler.mu is held.
func (lv *levelState) remove(wt *waiter) {
	q := &lv.queues[wt.queue]
	for i, x := range q.waiters {
		if x == wt {
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[len(q.waiters)-1] = nil
			q.waiters = q.waiters[:len(q.waiters)-1]
			lv.unwait(wt)
			return
		}
	}
}

// charge corrects wt's queue by the service wt actually took: a flow of
// slow requests falls behind. One of quick requests catches up, but not
// past the level's virtual time: a backlogged flow banks no credit from
// the luck of short requests that would later delay a flow just arrived.
// Scheduler.mu is held.
func (lv *levelState) charge(wt *waiter, now time.Time) {
	q := &lv.queues[wt.queue]
	q.executing--
	served := now.Sub(wt.grantedAt)
	lv.observeService(served)
	q.start = max(q.start+served.Seconds()-wt.est, lv.vtime)
	lv.maxStart = max(lv.maxStart, q.start)
}
