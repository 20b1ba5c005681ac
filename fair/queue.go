package fair

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// waiter is a request waiting for a seat. granted and grantedAt are
// guarded by Scheduler.mu; ready is closed when the seat is granted.
// ticket is the seat's record once it is granted, never reused.
type waiter struct {
	ticket    ticket
	ready     chan struct{}
	granted   bool
	grantedAt time.Time
	queue     int
	flow      uint64  // the flow key's hash
	est       float64 // the service time charged at dispatch, seconds
	seq       uint64  // arrival order in its level
}

// wait is Acquire's contended path: r joins the shortest queue of its flow's
// hand and waits for a seat, MaxWait, or the end of its context.
func (f *Scheduler) wait(w http.ResponseWriter, r *http.Request, lv *levelState) (Seat, bool) {
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
	wt.ticket.lv, wt.ticket.wt = lv, wt
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
	ended := false // the context ended, rather than MaxWait
	select {
	case <-wt.ready:
		return f.admitted(lv, wt, start, ev)
	case <-ctx.Done():
		ended = true
		if ctx.Err() == context.Canceled { // a deadline is a time-out
			ev.Outcome = Canceled
		}
	case <-timer.C:
	}
	now := time.Now()
	f.mu.Lock()
	if wt.granted && !ended {
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

// admitted reports a waiter's admission and returns its seat.
func (f *Scheduler) admitted(lv *levelState, wt *waiter, start time.Time, ev Event) (Seat, bool) {
	ev.Outcome = Admitted
	ev.Wait = wt.grantedAt.Sub(start)
	f.observe(ev)
	return Seat{t: &wt.ticket}, true // gen 0: the ticket is new
}

// refuse writes a 429 or 503 with its Retry-After and problem body.
func (f *Scheduler) refuse(w http.ResponseWriter, lv *levelState, status int, retry int64, ev Event) (Seat, bool) {
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
	return Seat{}, false
}

// release frees the seat s holds and hands it on, the first time it is
// called for s. An uncontended admission's ticket goes back to the free
// list.
func (f *Scheduler) release(s Seat) {
	t := s.t
	lv, wt := t.lv, t.wt
	var now time.Time
	if wt != nil {
		now = time.Now()
	}
	seats := f.readSeats() // outside the lock, as in Acquire
	f.mu.Lock()
	if t.gen != s.gen { // released already
		f.mu.Unlock()
		return
	}
	t.gen++
	f.free(lv)
	if wt != nil {
		lv.charge(wt, now)
	} else {
		t.next, lv.tickets = lv.tickets, t
	}
	f.setSeats(seats) // seats that grew go to the waiters now, not at the next arrival
	f.dispatch()
	f.mu.Unlock()
}
