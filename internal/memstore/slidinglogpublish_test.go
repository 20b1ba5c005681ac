package memstore

import (
	"fmt"
	"runtime"
	"testing"
)

// hotLog takes one event of r's key at stamp and makes its log the
// shard's hot log, as a check that finds the lock taken does.
func hotLog(t *testing.T, s *Store, r *Request, stamp int64) *eventLog {
	t.Helper()
	if res := s.Take(r, stamp); !res.Allowed {
		t.Fatalf("the first take was denied: %+v", res)
	}
	promoteKey(s, r)
	h := s.hash(r)
	g, ok := s.logs[s.logIndex(h)].t.get(h)
	if !ok || !logState(g.state.Load()).hot() {
		t.Fatal("no hot log for the key")
	}
	return g
}

// unfinishedTake makes the next state of the hot log g as a lock-free take
// of one event stamped at stamp does by its swap (raising the floor first),
// without writing the stamp: what a check sees of a take whose goroutine
// stopped between its swap and its stores. It returns the pending slot,
// which finish publishes.
func unfinishedTake(t *testing.T, g *eventLog, stamp int64) pendingSlot {
	t.Helper()
	w := logState(g.state.Load())
	mine := pendingBits(w.ver(), 1)
	if w.held() || w&mine != 0 {
		t.Fatalf("the log cannot take a pending event: %x", w)
	}
	q := w.ring(g.t)
	g.raiseFloor(g.floor.Load(), stamp)
	next := packLog(w.ver()+1, q.head, q.n+1) | w&(logHot|logPendMask<<logPendShift) | mine
	g.state.Store(uint64(next))
	return pendingSlot{(q.head + q.n) % len(g.t), mine}
}

// pendingSlot is the slot of an unfinished take and its pending bit.
type pendingSlot struct {
	at   int
	mine logState
}

// finish writes the stamp of an unfinished take and clears its pending
// bit, as the take's goroutine does when it runs again.
func finish(g *eventLog, p pendingSlot, stamp int64) { g.publish(p.at, 1, stamp, p.mine) }

// TestSlidingLogCheckDecidesWithoutWaitingForAnUnfinishedTake: a check of
// a hot key that finds another take swapped in but not yet stamped decides
// at once, without waiting for that take's goroutine: it decides no
// earlier than the floor the take raised, counts the pending event, and
// reads only the older events. The take here is finished only after the
// check has returned, so a check that waits for it never returns.
func TestSlidingLogCheckDecidesWithoutWaitingForAnUnfinishedTake(t *testing.T) {
	const rate, period = 100, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	g := hotLog(t, s, &r, 10_000)
	slot := unfinishedTake(t, g, 10_500)
	var res Result
	if !g.try(&r, 10_400, &res, false) { // its clock behind the pending take's
		t.Fatal("the check of a hot log that is not held needs the lock")
	}
	want := Result{Allowed: true, Remaining: rate - 3, ResetAfter: period, Next: 10_000 + period - 10_500, Slot: 10_500}
	if res != want {
		t.Fatalf("check beside an unfinished take:\n got %+v\nwant %+v (decided at the pending take's floor)", res, want)
	}
	if w := logState(g.state.Load()); w.depth() != 2 {
		t.Fatalf("%d of the newest events not all written after the check's own take, want 2 (the unfinished take's and the check's)", w.depth())
	}
	finish(g, slot, 10_500)
	if w := logState(g.state.Load()); w.pending() != 0 {
		t.Fatalf("pending bits %b once every take is finished", w.pending())
	}
	m := logModel{stamps: []int64{10_000, 10_500, 10_500}}
	r.Cost = 0
	if got, want := s.Take(&r, 10_600), m.decide(10_600, &r); got != want {
		t.Fatalf("the log after both takes:\n got %+v\nwant %+v", got, want)
	}
}

// TestSlidingLogCheckWaitsForAPendingStampItNeeds: a check whose decision
// depends on a pending event (a denial, whose fields read the newest
// events) waits for its stamp rather than reading the slot's old value.
//
// On one P the order is fixed: the goroutine that finishes the take runs
// only once the check gives way to the scheduler, so the check has read
// the unfinished state first.
func TestSlidingLogCheckWaitsForAPendingStampItNeeds(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rate, period = 2, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	g := hotLog(t, s, &r, 10_000)
	slot := unfinishedTake(t, g, 10_500)
	finished := make(chan struct{})
	go func() {
		finish(g, slot, 10_500)
		close(finished)
	}()
	var res Result
	if !g.try(&r, 10_600, &res, false) {
		t.Fatal("the check of a hot log that is not held needs the lock")
	}
	<-finished
	if res.Allowed {
		t.Fatalf("a third event in [10000, 11000) with a rate of %d: %+v", rate, res)
	}
	if want := int64(10_000 + period - 10_600); res.RetryAfter != want {
		t.Fatalf("RetryAfter %d, want %d (when the first event leaves)", res.RetryAfter, want)
	}
	if want := int64(10_500 + period - 10_600); res.ResetAfter != want {
		t.Fatalf("ResetAfter %d, want %d (when the unfinished take's event leaves)", res.ResetAfter, want)
	}
}

// TestSlidingLogCheckWaitsForAPendingEventThatMayHaveLeft: when every
// written event has left the window, whether a pending one has too is its
// taker's stamp to tell, and its slot may not be freed before the stamp is
// written: the check waits for it. Checked where the walk from the oldest
// event reaches the pending one, and where the floor says that every event
// has left.
func TestSlidingLogCheckWaitsForAPendingEventThatMayHaveLeft(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rate, period = 2, 1000
	for _, c := range []struct {
		now  int64
		want Result
	}{
		{11_050, Result{Allowed: true, Remaining: 0, ResetAfter: period, Next: 10_100 + period - 11_050, Slot: 11_050}}, // 10_000 has left, 10_100 not
		{11_200, Result{Allowed: true, Remaining: 1, ResetAfter: period, Next: period, Slot: 11_200}},                   // both have left
	} {
		s := New(Config{})
		r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
		g := hotLog(t, s, &r, 10_000)
		slot := unfinishedTake(t, g, 10_100)
		finished := make(chan struct{})
		go func() {
			finish(g, slot, 10_100)
			close(finished)
		}()
		var res Result
		if !g.try(&r, c.now, &res, false) {
			t.Fatal("the check of a hot log that is not held needs the lock")
		}
		<-finished
		if res != c.want {
			t.Fatalf("check at %d beside a pending event stamped 10100:\n got %+v\nwant %+v", c.now, res, c.want)
		}
		if w := logState(g.state.Load()); w.pending() != 0 {
			t.Fatalf("pending bits %b once every take is finished", w.pending())
		}
	}
}

// TestSlidingLogPendingTakesFinishInAnyOrder: takes pending at once clear
// their own bits whichever finishes first, on a ring that wraps, and a
// Return that comes meanwhile waits for them before it reads the ring.
func TestSlidingLogPendingTakesFinishInAnyOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rate, period = 4, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	g := hotLog(t, s, &r, 10_000)
	for _, at := range []int64{10_100, 11_050} { // 11_050 drops 10_000
		if res := s.Take(&r, at); !res.Allowed {
			t.Fatalf("take at %d denied: %+v", at, res)
		}
	}
	a := unfinishedTake(t, g, 11_100)
	b := unfinishedTake(t, g, 11_200)
	if a.at != 3 || b.at != 0 {
		t.Fatalf("pending slots %d and %d, want 3 and 0 (the ring wraps)", a.at, b.at)
	}
	finish(g, b, 11_200)
	if w := logState(g.state.Load()); w.depth() != 2 {
		t.Fatalf("%d of the newest events not all written after the newer take finished, want 2", w.depth())
	}
	finished := make(chan struct{})
	go func() {
		finish(g, a, 11_100)
		close(finished)
	}()
	ret := r
	ret.Slot = 11_100
	s.Return(&ret, 11_300) // waits for the stamp it gives back
	<-finished
	m := logModel{stamps: []int64{10_100, 11_050, 11_200}, floor: 11_200}
	r.Cost = 0
	if got, want := s.Take(&r, 11_300), m.decide(11_300, &r); got != want {
		t.Fatalf("after both takes finished and one was given back:\n got %+v\nwant %+v", got, want)
	}
}

// TestSlidingLogTakeRaisesTheFloorBeforeItsSwap: a lock-free take of a
// hot log raises the floor to its stamp before it swaps in its claim, so
// that a check that finds the swap (and cannot yet read the stamp) decides
// no earlier. A take whose swap fails, its state gone, shows the order:
// the floor is raised all the same.
func TestSlidingLogTakeRaisesTheFloorBeforeItsSwap(t *testing.T) {
	const rate, period = 10, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	g := hotLog(t, s, &r, 10_000)
	stale := logState(g.state.Load())
	if res := s.Take(&r, 10_100); !res.Allowed { // the state moves on
		t.Fatalf("take at 10100 denied: %+v", res)
	}
	if claimOne(g, stale, 10_300) {
		t.Fatal("a claim on a state since replaced succeeded")
	}
	if f := g.floor.Load(); f != 10_300 {
		t.Fatalf("floor %d after a take at 10300 lost its swap, want 10300: a check that found its swap would decide before its stamp", f)
	}
}

// TestSlidingLogTakeSwapsInAfterAPendingTakeFinishes: a take decided on a
// state in which another take was pending still swaps in when the only
// change since is that take writing its stamps (its events, newer than
// the oldest the decision kept, were counted either way), rather than
// deciding again: on a hot key on two cores that is the common case.
func TestSlidingLogTakeSwapsInAfterAPendingTakeFinishes(t *testing.T) {
	const rate, period = 10, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	g := hotLog(t, s, &r, 10_000)
	p := unfinishedTake(t, g, 10_500)
	w := logState(g.state.Load()) // what the take decides on
	finish(g, p, 10_500)
	if !claimOne(g, w, 10_600) {
		t.Fatal("the take was sent to decide again when only a pending take had finished")
	}
	if w := logState(g.state.Load()); w.depth() != 0 || w.ring(g.t).n != 3 {
		t.Fatalf("after the take: %d events, %d of the newest not all written; want 3 and 0", w.ring(g.t).n, w.depth())
	}
	m := logModel{stamps: []int64{10_000, 10_500, 10_600}}
	r.Cost = 0
	if got, want := s.Take(&r, 10_700), m.decide(10_700, &r); got != want {
		t.Fatalf("the log after the take:\n got %+v\nwant %+v", got, want)
	}
}

// TestSlidingLogReplacedHotLogIsTakenUnderTheLockOnly: when another key
// becomes its shard's hot log, the log it replaces is made cold once its
// pending takes have written their stamps (on one P, the unfinished take
// here finishes only when the promotion gives way to it), and a check that
// still holds it from the shard's hot log is sent to the lock, where it is
// taken without pending slots.
func TestSlidingLogReplacedHotLogIsTakenUnderTheLockOnly(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rate, period = 10, 1000
	s := New(Config{})
	l := Limit{Rate: rate, Period: period, Capacity: rate}
	a, b := sameShardKeys(s)
	ra := Request{Key: a, Alg: SlidingLog, Limit: l, Cost: 1}
	rb := Request{Key: b, Alg: SlidingLog, Limit: l, Cost: 1}
	g := hotLog(t, s, &ra, 10_000)
	p := unfinishedTake(t, g, 10_500)
	go finish(g, p, 10_500)
	hotLog(t, s, &rb, 10_000) // replaces a's log as the hot one
	if w := logState(g.state.Load()); w.hot() || w.depth() != 0 {
		t.Fatalf("the replaced log: hot %v, %d of the newest events not all written; want cold, 0", w.hot(), w.depth())
	}
	var res Result
	if g.try(&ra, 10_600, &res, false) {
		t.Fatalf("a check without the lock decided on a cold log: %+v", res)
	}
	m := logModel{stamps: []int64{10_000, 10_500}}
	if got, want := s.Take(&ra, 10_600), m.decide(10_600, &ra); got != want {
		t.Fatalf("a take of the replaced log:\n got %+v\nwant %+v", got, want)
	}
	if w := logState(g.state.Load()); w.depth() != 0 || w.ring(g.t).n != 3 {
		t.Fatalf("after the take: %d events, %d not all written; want 3, 0", w.ring(g.t).n, w.depth())
	}
}

// sameShardKeys returns two keys whose sliding logs share a shard of s.
func sameShardKeys(s *Store) (string, string) {
	first := map[int]string{}
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		sh := s.index(s.hash(&Request{Key: k, Alg: SlidingLog}))
		if other, ok := first[sh]; ok {
			return other, k
		}
		first[sh] = k
	}
}

// claimOne is a lock-free take of one event stamped now on the hot log g,
// decided on state w (forgetting nothing), as try claims it.
func claimOne(g *eventLog, w logState, now int64) bool {
	q := w.ring(g.t)
	next := packLog(w.ver()+1, q.head, q.n+1) | w&logHot
	return g.claim(w, next, (q.head+q.n)%len(g.t), 1, g.floor.Load(), now)
}

// promoteKey makes the log of r's key, if there is one, its shard's hot
// log, as a check that finds the shard's lock taken does.
func promoteKey(s *Store, r *Request) {
	h := s.hash(r)
	sh := &s.logs[s.logIndex(h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g, ok := sh.t.get(h); ok {
		sh.promote(g)
	}
}
