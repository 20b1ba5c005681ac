package fair

import "time"

// The order in which a level's waiters get seats: start-time fair queuing
// over the level's queues, in virtual time measured in seconds of
// (estimated, then observed) service.

// burstCredit is how many requests' worth of estimated service a flow that
// had nothing waiting may start before the level's virtual time, at most:
// a light flow's small bursts are not queued behind a heavy flow's
// backlog, and a flow that is always backlogged never has credit.
const burstCredit = 4

// queueState is one of a level's queues: the waiters of the flows dealt it,
// first come first served among themselves.
type queueState struct {
	waiters   []*waiter
	start     float64 // virtual start of its next dispatch, in seconds of service
	executing int     // requests it dispatched that are still served
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

// enqueue appends wt to queue qi. A queue that was empty starts at its
// own virtual start, or burstCredit requests' worth of service before the
// level's virtual time if that is later: a flow earns no more credit than
// that for the time it sent nothing, and none from its requests still
// served. When nothing of the level is waiting, the virtual time first
// catches up with every queue, so that flows start each congestion episode
// even. Scheduler.mu is held.
func (lv *levelState) enqueue(qi int, wt *waiter) {
	if lv.queued == 0 {
		lv.vtime = max(lv.vtime, lv.maxStart)
	}
	q := &lv.queues[qi]
	if len(q.waiters) == 0 {
		q.start = max(q.start, lv.vtime-burstCredit*lv.svc)
	}
	lv.seq++
	wt.queue, wt.seq = qi, lv.seq
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

// dequeue removes and returns the next waiter of the level (see next),
// charges its queue the estimated service time and advances the level's
// virtual time to the queue's start. lv.queued > 0. Scheduler.mu is held.
func (lv *levelState) dequeue() *waiter {
	q := &lv.queues[lv.next()]
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

// next returns the queue served next. Queues whose virtual start is not
// past the level's virtual time have had no more than their share: among
// them the oldest waiter goes first, so that light flows are served in
// their order of arrival and a flow's second request does not wait a round
// behind the others' later ones. When every waiting queue is ahead, the
// earliest start goes first (the fewest waiting, then the oldest, among
// equals): virtual finish time, as every queue is charged the same
// estimate. lv.queued > 0. Scheduler.mu is held.
func (lv *levelState) next() int {
	eligible, earliest := -1, -1
	for i := range lv.queues {
		q := &lv.queues[i]
		if len(q.waiters) == 0 {
			continue
		}
		if q.start <= lv.vtime && (eligible < 0 || q.waiters[0].seq < lv.queues[eligible].waiters[0].seq) {
			eligible = i
		}
		if earliest < 0 || lv.before(q, &lv.queues[earliest]) {
			earliest = i
		}
	}
	if eligible >= 0 {
		return eligible
	}
	return earliest
}

// before reports whether a goes before b when both are ahead of the
// virtual time. Both have waiters.
func (lv *levelState) before(a, b *queueState) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	if len(a.waiters) != len(b.waiters) {
		return len(a.waiters) < len(b.waiters)
	}
	return a.waiters[0].seq < b.waiters[0].seq
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
// past the level's virtual time (nor further behind it than it was): a
// backlogged flow banks no credit from the luck of short requests that
// would later delay a flow just arrived. Scheduler.mu is held.
func (lv *levelState) charge(wt *waiter, now time.Time) {
	q := &lv.queues[wt.queue]
	q.executing--
	served := now.Sub(wt.grantedAt)
	lv.observeService(served)
	q.start = max(q.start+served.Seconds()-wt.est, min(q.start, lv.vtime))
	lv.maxStart = max(lv.maxStart, q.start)
}
