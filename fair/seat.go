package fair

import "net/http"

// Seat is an admitted request's hold on its seat, returned by Acquire.
// Release frees the seat the first time it is called; later calls, on the
// Seat or on a copy of it, do nothing, and never free a seat another
// request holds. A Seat is a small value: copy it, keep it, release it
// from another goroutine. The zero Seat, and the Seat of an exempt
// request (which takes no seat), release nothing.
type Seat struct {
	t   *ticket
	gen uint64 // t.gen when the seat was handed out
}

// ticket records a taken seat: its level and, when the request waited, its
// waiter. An uncontended admission takes a ticket from its level's free
// list and its release puts it back, so that path allocates nothing once
// the list holds as many tickets as the level ever had requests served at
// once; a waiter carries its own, used once.
//
// gen is the number of times the ticket was released. A Seat carries the
// gen its holder was handed; release, under the lock it takes anyway,
// frees the seat and moves gen on only if the two still match, so only
// the holder's first Release frees anything. A stale Seat, whose ticket
// went on to a later request, carries an older gen and frees nothing.
// Checking under the lock costs no atomic instruction on the uncontended
// path; lv and wt never change, so a stale Seat reads them safely.
type ticket struct {
	lv   *levelState // set when the ticket is made, never changed
	wt   *waiter     // the same; nil for an uncontended admission
	gen  uint64      // guarded by Scheduler.mu
	next *ticket     // in levelState.tickets; guarded by Scheduler.mu
}

// Release frees s's seat and hands it to a waiting request, the first time
// it is called; it does nothing after.
func (s Seat) Release() {
	if s.t != nil {
		s.t.lv.f.release(s)
	}
}

// Acquire waits for a seat for r. When the request may proceed it returns
// ok and the Seat, which the caller must Release when the request has been
// served. Otherwise Acquire has written the response (429 when the flow's
// queue is full, 503 when no seat came within MaxWait or before the
// context ended) and the caller must stop.
//
// An uncontended admission (a seat free and nobody waiting) neither
// allocates nor reads the clock nor computes the flow key. Framework
// adapters build on Acquire (or Admit); with net/http, use Handler.
func (f *Scheduler) Acquire(w http.ResponseWriter, r *http.Request) (Seat, bool) {
	lv := f.level(r)
	if lv.Exempt {
		f.observe(Event{Level: lv.Name, Outcome: Exempt, Queue: -1, Request: r})
		return Seat{}, true
	}
	seats := f.readSeats() // outside the lock: SeatsFunc is the user's code
	f.mu.Lock()
	f.setSeats(seats)
	if f.queued == 0 && f.canTake(lv) {
		f.take(lv)
		t := lv.ticket()
		gen := t.gen
		f.mu.Unlock()
		f.observe(Event{Level: lv.Name, Outcome: Admitted, Queue: -1, Request: r})
		return Seat{t: t, gen: gen}, true
	}
	f.mu.Unlock()
	return f.wait(w, r, lv)
}

// Admit is Acquire returning the seat as a done function, the shape of
// ratelimit.Limiter.Admit: when ok, the caller must call done when the
// request has been served. Calls after the first do nothing, as with
// Release. done is the Seat's Release method value, so Admit allocates it
// (one small object) on each admission; Acquire is the form that does not
// allocate.
func (f *Scheduler) Admit(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	s, ok := f.Acquire(w, r)
	if !ok || s.t == nil {
		return noop, ok
	}
	return s.Release, true
}

func noop() {}

// ticket returns a ticket for an uncontended admission to lv, from the
// free list when it has one. Scheduler.mu is held.
func (lv *levelState) ticket() *ticket {
	t := lv.tickets
	if t == nil {
		return &ticket{lv: lv}
	}
	lv.tickets, t.next = t.next, nil
	return t
}
