package memstore

import (
	"runtime"
	"testing"
)

// unfinishedTake makes the next state of the log of r's key as a lock-free
// take of one event does by its swap, without writing the event's stamp or
// publishing it: what a check sees of a take whose goroutine stopped
// between its swap and its stores. It returns the log, the new state and
// the index of the unwritten stamp.
func unfinishedTake(t *testing.T, s *Store, r *Request) (*eventLog, logState, int) {
	t.Helper()
	h := s.hash(r)
	g, ok := s.logs[s.index(h)].t.get(h)
	if !ok {
		t.Fatal("no log for the key")
	}
	w := logState(g.state.Load())
	if w.held() || g.done.Load() != w.ver() {
		t.Fatalf("the log is not at rest: %x", w)
	}
	q := w.ring(g.t)
	next := packLog(w.ver()+1, q.head, q.n+1) | w&logHot
	g.state.Store(uint64(next))
	return g, next, (q.head + q.n) % len(g.t)
}

// finish writes the stamp of the unfinished take of state w at slot (and
// on a hot log raises the floor to it) and publishes it, as the take's
// goroutine does when it runs again.
func finish(g *eventLog, w logState, slot int, stamp int64) {
	g.t[slot].Store(stamp)
	if w.hot() {
		g.floor.Store(stamp)
	}
	g.done.Store(w.ver())
}

// TestSlidingLogCheckDecidesOnTheStampOfAnUnfinishedTake: a check that
// finds the take before it swapped in but not yet stamped waits for the
// stamp and counts it, rather than reading the slot's old value (which
// would make the key look idle and admit past the rate).
//
// On one P the order is fixed: the goroutine that finishes the take runs
// only once the check gives way to the scheduler, so the check has read
// the unfinished state first. A hot log's check reads the floor, which the
// take raises with its stamp, and is run too.
func TestSlidingLogCheckDecidesOnTheStampOfAnUnfinishedTake(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "locked", true: "hot"}[hot], func(t *testing.T) { checkUnfinishedTake(t, hot) })
	}
}

func checkUnfinishedTake(t *testing.T, hot bool) {
	const rate, period = 2, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	s.Take(&r, 10_000)
	if hot {
		promoteKey(s, &r)
	}
	g, w, slot := unfinishedTake(t, s, &r)
	finished := make(chan struct{})
	go func() {
		finish(g, w, slot, 10_500)
		close(finished)
	}()
	var res Result
	if !g.try(&r, 10_600, &res) {
		t.Fatal("the check of a log at rest needs the lock")
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

// TestSlidingLogPublishedTellsAReplacedStateFromAnUnfinishedOne: a check
// holding a state w waits only while w is the state and its take is
// unfinished. Once w is published it may decide (a swap or confirmation
// then finds whether w is still the state); once w has been replaced and
// its successor published, it must read the log again.
func TestSlidingLogPublishedTellsAReplacedStateFromAnUnfinishedOne(t *testing.T) {
	const rate, period = 4, 1000
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	s.Take(&r, 10_000)
	g, w1, slot1 := unfinishedTake(t, s, &r)
	finish(g, w1, slot1, 10_100)
	if !g.published(w1) {
		t.Fatal("w1 is published and current, and published reports it replaced")
	}
	_, w2, slot2 := unfinishedTake(t, s, &r)
	if !g.published(w1) {
		t.Fatal("w1 is published (its successor is not): published must let the check decide and fail its swap")
	}
	finish(g, w2, slot2, 10_200)
	if g.published(w1) {
		t.Fatal("w1 was replaced by w2, now published: published reports w1 as the state")
	}
	if !g.published(w2) {
		t.Fatal("w2 is published and current")
	}
}

// promoteKey makes the log of r's key, if there is one, its shard's hot
// log, as a check that finds the shard's lock taken does.
func promoteKey(s *Store, r *Request) {
	h := s.hash(r)
	sh := &s.logs[s.index(h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g, ok := sh.t.get(h); ok {
		sh.promote(g)
	}
}
