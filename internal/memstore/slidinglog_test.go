package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/ratelimit/stores"
)

// logModel is the sliding log written the obvious way: a slice of every
// admitted event's time, for TestSlidingLogMatchesModel to check the ring
// against. floor is the newest stamp when events were last given back: no
// request is decided before it, since the takes up to it dropped the
// events that had left their window.
type logModel struct {
	stamps []int64
	floor  int64
}

// giveBack gives back the newest event.
func (m *logModel) giveBack() {
	m.floor = max(m.floor, m.stamps[len(m.stamps)-1])
	m.stamps = m.stamps[:len(m.stamps)-1]
}

func (m *logModel) decide(now int64, r *Request) Result {
	if now = max(now, m.floor); len(m.stamps) > 0 {
		now = max(now, m.stamps[len(m.stamps)-1])
	}
	var live []int64
	for _, s := range m.stamps {
		if s > now-r.Limit.Period {
			live = append(live, s)
		}
	}
	need := max(r.Cost, 1)
	allowed := int64(len(live))+need <= r.Limit.Rate
	var res Result
	if allowed && r.Cost > 0 {
		for range r.Cost {
			live = append(live, now)
		}
		m.stamps = live
		res.Slot = uint64(now)
	}
	res.Allowed = allowed
	res.Remaining = max(0, r.Limit.Rate-int64(len(live)))
	if len(live) > 0 {
		res.ResetAfter = live[len(live)-1] + r.Limit.Period - now
		res.Next = live[0] + r.Limit.Period - now
	}
	if !allowed {
		// The request fits once all but Rate-need of the events have left.
		res.RetryAfter = live[int64(len(live))+need-r.Limit.Rate-1] + r.Limit.Period - now
	}
	return res
}

// TestSlidingLogMatchesModel replays random timelines (costs from 0 to the
// rate, stamps that jump back as well as forward, now and then a Return of
// a take's events) through the engine and the model, and requires the same
// Result every time: Remaining, RetryAfter, ResetAfter and Next exact to
// the nanosecond; on a log checked under the lock, and on one made its
// shard's hot log, whose checks read the floor in place of the newest stamp.
func TestSlidingLogMatchesModel(t *testing.T) {
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "locked", true: "hot"}[hot], func(t *testing.T) { matchModel(t, hot) })
	}
}

func matchModel(t *testing.T, hot bool) {
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 200 {
		s := New(Config{MaxKeys: 1 << 12})
		rate := 1 + rng.Int64N(12)
		period := 1 + rng.Int64N(1000)
		r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}}
		var m logModel
		now := int64(1_000_000)
		for op := range 300 {
			now += rng.Int64N(period/2+1) - period/10 // sometimes back
			r.Cost = rng.Int64N(rate + 1)
			if rng.IntN(10) == 0 && len(m.stamps) > 0 {
				// Give back the newest take's events in both.
				ret := r
				ret.Cost = 1
				ret.Slot = uint64(m.stamps[len(m.stamps)-1])
				s.Return(&ret, now)
				m.giveBack()
				continue
			}
			if hot {
				promoteKey(s, &r)
			}
			got, want := s.Take(&r, now), m.decide(now, &r)
			if got != want {
				t.Fatalf("run %d (rate %d period %d) op %d at %d, cost %d:\n got %+v\nwant %+v", run, rate, period, op, now, r.Cost, got, want)
			}
		}
	}
}

// TestSlidingLogCheckWritesEveryFieldOfItsResult: a check writes its
// Result field by field into the caller's (see ring.deny), so every path
// (an allowed take, a denial, a read; on a hot log without the lock and on
// a log checked under it) must write every field: replayed against the
// model with a Result that holds another request's fields every time, as
// one does when a check is decided again under the lock after a lock-free
// attempt that wrote it and then needed the lock.
func TestSlidingLogCheckWritesEveryFieldOfItsResult(t *testing.T) {
	stale := Result{Allowed: true, Remaining: -1, RetryAfter: -2, ResetAfter: -3, Delay: -4, Slot: 5, Next: -6}
	for _, hot := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(3, 5))
		const rate, period = 6, 1000
		s := New(Config{})
		r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
		var g *eventLog
		if hot {
			g = hotLog(t, s, &r, 10_000)
		} else {
			s.Take(&r, 10_000)
			h := s.hash(&r)
			g, _ = s.logs[s.logIndex(h)].t.get(h)
		}
		m := logModel{stamps: []int64{10_000}}
		sh := &s.logs[s.logIndex(s.hash(&r))]
		now := int64(10_000)
		for op := range 2_000 {
			now += rng.Int64N(period/2) - period/10 // sometimes back
			r.Cost = rng.Int64N(logPendBits + 1)
			got := stale
			if !hot {
				sh.mu.Lock()
			}
			ok := g.try(&r, now, &got, !hot)
			if !hot {
				sh.mu.Unlock()
			}
			if want := m.decide(now, &r); !ok || got != want {
				t.Fatalf("hot %v, op %d at %d, cost %d: decided %v\n got %+v\nwant %+v", hot, op, now, r.Cost, ok, got, want)
			}
		}
	}
}

// requireRateInEveryWindow fails t if the sorted event times hold more
// than rate events in a window [e, e+period) that starts at an event e:
// the windows that hold the most events start at one.
func requireRateInEveryWindow(t *testing.T, times []int64, period int64, rate int) {
	t.Helper()
	for i := range times {
		j := i
		for j < len(times) && times[j] < times[i]+period {
			j++
		}
		if j-i > rate {
			t.Fatalf("%d events in [%d, %d), limit %d", j-i, times[i], times[i]+period, rate)
		}
	}
}

// TestSlidingLogNeverExceedsRateInAnyTrailingWindow sends bursts from many
// callers whose clocks disagree and jump back, and checks every trailing
// window of the times the store decided at: never more than Rate events.
func TestSlidingLogNeverExceedsRateInAnyTrailingWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := New(Config{})
	const rate, period = 5, 1000
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}}
	var admitted []int64
	base := int64(0)
	for range 20_000 {
		base += rng.Int64N(40)
		now := base - rng.Int64N(3*period) // a caller behind by up to three periods
		r.Cost = 1 + rng.Int64N(2)
		if res := s.Take(&r, now); res.Allowed {
			for range r.Cost {
				admitted = append(admitted, int64(res.Slot)) // the time it was decided at
			}
		}
	}
	requireRateInEveryWindow(t, admitted, period, rate)
	if len(admitted) < 1000 {
		t.Fatalf("only %d admitted: the run tests nothing", len(admitted))
	}
}

// TestSlidingLogCostThatDoesNotFitConsumesNothing: a take of cost n is
// allowed only when all n fit, and a denied one leaves the log as it was.
func TestSlidingLogCostThatDoesNotFitConsumesNothing(t *testing.T) {
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: 5, Period: 100, Capacity: 5}, Cost: 3}
	if res := s.Take(&r, 0); !res.Allowed || res.Remaining != 2 {
		t.Fatalf("first take of 3: %+v", res)
	}
	if res := s.Take(&r, 10); res.Allowed || res.Remaining != 2 || res.RetryAfter != 90 {
		t.Fatalf("second take of 3 out of the 2 left: %+v; want denied, 2 left, retry after 90", res)
	}
	r.Cost = 2
	if res := s.Take(&r, 20); !res.Allowed || res.Remaining != 0 || res.Next != 80 || res.ResetAfter != 100 {
		t.Fatalf("take of the last 2: %+v", res)
	}
}

// TestSlidingLogForcedTakeOfAKnownKeyIsApplied: a forced take is charged
// whether or not it fits, also on a key whose log exists (whose checks try
// the lock-free take first): past the limit it is reported denied, its
// events fill the log, and the key is denied until they leave.
func TestSlidingLogForcedTakeOfAKnownKeyIsApplied(t *testing.T) {
	s := New(Config{})
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: 5, Period: 100, Capacity: 5}, Cost: 1}
	if res := s.Take(&r, 0); !res.Allowed {
		t.Fatalf("first take: %+v", res)
	}
	forced := r
	forced.Cost, forced.Force = 6, true
	if res := s.Take(&forced, 10); res.Allowed || res.Remaining != 0 || res.RetryAfter != 100 || res.Slot != 10 {
		t.Fatalf("forced take of 6 past the limit of 5: %+v; want denied, charged (slot 10), 0 left, retry after 100", res)
	}
	if res := s.Take(&r, 50); res.Allowed {
		t.Fatalf("take at 50 after the forced take: %+v; want denied, the log full", res)
	}
	if res := s.Take(&r, 110); !res.Allowed || res.Remaining != 4 {
		t.Fatalf("take at 110, when the forced events have left: %+v", res)
	}
}

// TestSlidingLogWeighsItsEventsAgainstTheBound: a store bounded to B keys
// holds sliding logs whose weights (see logUnits) add up to at most B, and
// a new key evicts to stay within it.
func TestSlidingLogWeighsItsEventsAgainstTheBound(t *testing.T) {
	const bound = 1024
	s := New(Config{MaxKeys: bound, Shards: 1})
	r := Request{Alg: SlidingLog, Limit: Limit{Rate: 100, Period: 1e9, Capacity: 100}, Cost: 1}
	w := newLog(0, 100).weight()
	for i := range 200 {
		r.Key = string(rune('a'+i%26)) + string(rune('A'+i/26))
		if res := s.Take(&r, int64(i)); !res.Allowed {
			t.Fatalf("key %d denied: %+v", i, res)
		}
		if used := s.logs[0].used; used > bound || used != w*s.Len() {
			t.Fatalf("after key %d: weight %d for %d keys of weight %d, bound %d", i, used, s.Len(), w, bound)
		}
	}
	if s.Len() != bound/w {
		t.Fatalf("%d keys of weight %d held under a bound of %d; want %d", s.Len(), w, bound, bound/w)
	}
}

// TestSlidingLogTakeAllRollsBack: a TakeAll denied by another request
// leaves a log as it was, and one it created is gone.
func TestSlidingLogTakeAllRollsBack(t *testing.T) {
	s := New(Config{})
	log := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: 3, Period: 100, Capacity: 3}, Cost: 1}
	full := Request{Key: "f", Alg: FixedWindow, Limit: Limit{Rate: 1, Period: 100, Capacity: 1}, Cost: 1}
	s.Take(&full, 0)
	res := make([]Result, 3)
	if s.TakeAll([]Request{log, log, full}, res, 0); res[2].Allowed {
		t.Fatal("the full window allowed")
	}
	if s.Len() != 1 {
		t.Fatalf("%d keys after a denied TakeAll; want the window alone", s.Len())
	}
	s.Take(&log, 10)
	s.TakeAll([]Request{log, full}, res[:2], 20)
	if got := s.Take(&log, 30); got.Remaining != 1 {
		t.Fatalf("after one take and a denied TakeAll, the next take leaves %d; want 1", got.Remaining)
	}
}

// TestSlidingLogDroppedAsExpiredIsNotCountedBeforeItsExpiry: a full log
// dropped to make room once its events have left is never counted again
// before it emptied, so a request stamped inside its window (a slow
// clock) cannot add to the events it held there.
func TestSlidingLogDroppedAsExpiredIsNotCountedBeforeItsExpiry(t *testing.T) {
	s := New(Config{MaxKeys: 1024, Shards: 1})
	r := Request{Key: "a", Alg: SlidingLog, Limit: Limit{Rate: 5, Period: 100, Capacity: 5}, Cost: 5}
	if res := s.Take(&r, 1000); !res.Allowed {
		t.Fatalf("filling the log: %+v", res)
	}
	h := s.hash(&r)
	for i := 0; s.logs[0].t.find(h) >= 0; i++ { // new keys at 1200 until the expired log is dropped
		k := r
		k.Key, k.Cost = fmt.Sprint("k", i), 1
		s.Take(&k, 1200)
	}
	r.Cost = 1
	res := s.Take(&r, 1050) // inside the dropped log's window
	if !res.Allowed || int64(res.Slot) < 1100 {
		t.Fatalf("a request stamped 1050 after the log of 5 events at 1000 was dropped: %+v; want allowed at 1100 or later", res)
	}
}

// TestSlidingLogRateChangeCountsOnlyTheNewWeight: when a key's Rate
// changes, its log is rebuilt at the new capacity, keeping its events, and
// the shard counts the new log's weight in place of the old one's, for a
// key alone in its table and for keys whose slots shift when it moves.
func TestSlidingLogRateChangeCountsOnlyTheNewWeight(t *testing.T) {
	s := New(Config{Shards: 1})
	r := Request{Alg: SlidingLog, Limit: Limit{Rate: 10, Period: 1e9, Capacity: 10}, Cost: 1}
	want := func(keys, rate int64) int { return int(keys) * newLog(0, rate).weight() }
	r.Key = "alone"
	s.Take(&r, 1)
	r.Limit = Limit{Rate: 20, Period: 1e9, Capacity: 20}
	if res := s.Take(&r, 2); !res.Allowed || res.Remaining != 18 {
		t.Fatalf("take at the new rate: %+v, want allowed with 18 remaining", res)
	}
	if used := s.logs[0].used; used != want(1, 20) {
		t.Fatalf("one key at rate 20 weighs %d, want %d", used, want(1, 20))
	}
	for i := range 40 { // enough keys that removals shift their neighbours
		r.Key = fmt.Sprint("k", i)
		r.Limit = Limit{Rate: 10, Period: 1e9, Capacity: 10}
		s.Take(&r, 3)
	}
	for i := range 40 {
		r.Key = fmt.Sprint("k", i)
		r.Limit = Limit{Rate: 20, Period: 1e9, Capacity: 20}
		if res := s.Take(&r, 4); !res.Allowed || res.Remaining != 18 {
			t.Fatalf("key %d at the new rate: %+v, want allowed with 18 remaining", i, res)
		}
	}
	if used := s.logs[0].used; used != want(41, 20) {
		t.Fatalf("41 keys at rate 20 weigh %d, want %d", used, want(41, 20))
	}
}

// TestSlidingLogGivenBackNeverBringsBackWhatItsTakeDropped: a take drops
// the events that left its window; when it is given back (a Return, or a
// TakeAll rolled back), a request whose clock is behind is still decided
// no earlier than that take, so the dropped events are never counted out
// while they were in the window.
func TestSlidingLogGivenBackNeverBringsBackWhatItsTakeDropped(t *testing.T) {
	r := Request{Key: "k", Alg: SlidingLog, Limit: Limit{Rate: 1, Period: 1000, Capacity: 1}, Cost: 1}
	full := Request{Key: "f", Alg: FixedWindow, Limit: Limit{Rate: 1, Period: 10_000, Capacity: 1}, Cost: 1}
	giveBack := map[string]func(s *Store){
		"Return": func(s *Store) {
			if res := s.Take(&r, 1000); !res.Allowed {
				t.Fatalf("take at 1000: %+v", res)
			}
			ret := r
			ret.Slot = 1000
			s.Return(&ret, 1000)
		},
		"TakeAll": func(s *Store) {
			s.Take(&full, 0)
			res := make([]Result, 2)
			if s.TakeAll([]Request{r, full}, res, 1000); !res[0].Allowed || res[1].Allowed {
				t.Fatalf("TakeAll at 1000: %+v, want the log allowed and the full window denied", res)
			}
		},
	}
	for name, back := range giveBack {
		t.Run(name, func(t *testing.T) {
			s := New(Config{})
			s.Take(&r, 0)
			back(s) // a take at 1000, which dropped the event at 0, given back
			if res := s.Take(&r, 500); res.Allowed && int64(res.Slot) < 1000 {
				t.Fatalf("a take with its clock at 500: %+v; its event and the one at 0 would be 2 in [0, 1000)", res)
			}
		})
	}
}

// TestSlidingLogHotKeyTakenConcurrentlyNeverExceedsRate: many goroutines
// take one key at once, lock-free (its log is the shard's hot one), with
// clocks that lag by up to a period, costs of 1 and 2, Returns of their own
// takes and TakeAll calls beside, and every trailing window of the times
// the store decided at holds at most Rate events: no take is lost to
// another taking at the same moment.
//
// At a rate of 5 most takes are denied; at 64 most are allowed, so that
// several takes are pending at once (more than state can mark, now and
// then) and finish in any order, on a ring that wraps. With two keys in
// one shard, each worker checks both in turn, and the shard's hot log
// changes hands between them (the one it replaces made cold) while checks
// of both are under way.
func TestSlidingLogHotKeyTakenConcurrentlyNeverExceedsRate(t *testing.T) {
	a, b := sameShardKeys(New(Config{}))
	for _, rate := range []int64{5, 64} {
		t.Run(fmt.Sprintf("rate=%d", rate), func(t *testing.T) { hammerHotKey(t, rate, "k") })
		t.Run(fmt.Sprintf("rate=%d/two-keys", rate), func(t *testing.T) { hammerHotKey(t, rate, a, b) })
	}
}

func hammerHotKey(t *testing.T, rate int64, keys ...string) {
	for i, k := range keys {
		hammerKey(t, rate, k, keys[(i+1)%len(keys)])
	}
}

// hammerKey hammers key, as the test above describes, and checks its
// events; when other is another key of the same shard, every other check
// is of other, whose check now and then promotes it.
func hammerKey(t *testing.T, rate int64, key, other string) {
	const period, workers, ops = 1000, 8, 10_000
	s := New(Config{})
	r := Request{Key: key, Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}, Cost: 1}
	var clock atomic.Int64
	clock.Store(1e6) // no stamp is 0, which a Return reads as "the newest"
	s.Take(&r, clock.Load())
	promoteKey(s, &r) // as if a check had found the lock taken
	admitted := make([][]int64, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start // all at once
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			own := []int64{0}[:0]
			big := Request{Key: "w", Alg: FixedWindow, Limit: Limit{Rate: 1 << 40, Period: period, Capacity: 1 << 40}, Cost: 1}
			for i := range ops {
				now := clock.Add(rng.Int64N(period/rate/2)) - rng.Int64N(period)
				if other != key && i%2 == 1 {
					o := r
					o.Key = other
					s.Take(&o, now)
					if i%64 == 1 {
						promoteKey(s, &o)
					}
					if i%64 == 33 {
						promoteKey(s, &r)
					}
					continue
				}
				req := r
				req.Cost = 1 + rng.Int64N(2)
				switch k := rng.IntN(20); {
				case k == 0 && len(own) > 0: // give back the newest of its own events
					ret := r
					ret.Slot = uint64(own[len(own)-1])
					s.Return(&ret, now)
					own = own[:len(own)-1]
				case k == 1: // two takes of the key, all or nothing
					var res [3]Result
					s.TakeAll([]Request{req, r, big}, res[:], now)
					if res[0].Allowed && res[1].Allowed && res[2].Allowed {
						// Each at its own time: a check that lost its
						// swap may have raised the floor in between.
						for range req.Cost {
							own = append(own, int64(res[0].Slot))
						}
						own = append(own, int64(res[1].Slot))
					}
				default:
					if res := s.Take(&req, now); res.Allowed {
						for range req.Cost {
							own = append(own, int64(res.Slot))
						}
					}
				}
			}
			admitted[w] = own
		})
	}
	close(start)
	wg.Wait()
	all := slices.Sorted(slices.Values(slices.Concat(admitted...)))
	requireRateInEveryWindow(t, all, period, int(rate))
	if len(all) < 500 {
		t.Fatalf("only %d admitted: the run tests nothing", len(all))
	}
}

// TestSlidingLogHotKeyCostsAcrossThePendingLimitNeverExceedRate: takes of
// cost 1 to 6 of two keys of one shard, at a Rate of 24, from many
// goroutines whose clocks lag and jump back: costs up to four are claimed
// lock-free on the hot log (four pending at once fill every pending bit),
// larger ones go through the lock, which waits for the pending stamps;
// among them prepared takes, Returns of whole takes, all-or-nothing
// batches of both keys, and the hot log moving between the keys. Every
// trailing window of each key's admitted events holds at most Rate.
func TestSlidingLogHotKeyCostsAcrossThePendingLimitNeverExceedRate(t *testing.T) {
	const rate, period, workers, ops = 24, 1000, 8, 10_000
	s := New(Config{})
	a, b := sameShardKeys(s)
	keys := [2]string{a, b}
	base := Request{Alg: SlidingLog, Limit: Limit{Rate: rate, Period: period, Capacity: rate}}
	one := base
	one.Cost = 1
	prepared := s.Prepare(one)
	var clock atomic.Int64
	clock.Store(1e6)
	admitted := make([][2][]int64, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			type take struct {
				key  int
				at   int64
				cost int64
			}
			var own [2][]int64
			var takes []take
			record := func(k int, res Result, cost int64) {
				for range cost {
					own[k] = append(own[k], int64(res.Slot))
				}
				takes = append(takes, take{k, int64(res.Slot), cost})
			}
			for range ops {
				now := clock.Add(rng.Int64N(40)) - rng.Int64N(period)
				k := rng.IntN(2)
				r := base
				r.Key = keys[k]
				r.Cost = 1 + rng.Int64N(6)
				switch op := rng.IntN(16); {
				case op == 0 && len(takes) > 0: // give back a whole take of its own
					i := rng.IntN(len(takes))
					tk := takes[i]
					takes = slices.Delete(takes, i, i+1)
					ret := base
					ret.Key, ret.Slot, ret.Cost = keys[tk.key], uint64(tk.at), tk.cost
					s.Return(&ret, now)
					for range tk.cost {
						j := slices.Index(own[tk.key], tk.at)
						own[tk.key] = slices.Delete(own[tk.key], j, j+1)
					}
				case op == 1: // both keys, all or nothing
					o := base
					o.Key, o.Cost = keys[1-k], 1
					var res [2]Result
					s.TakeAll([]Request{r, o}, res[:], now)
					if res[0].Allowed && res[1].Allowed {
						record(k, res[0], r.Cost)
						record(1-k, res[1], 1)
					}
				case op == 2:
					promoteKey(s, &r) // as if a check found the lock taken
				case op < 6 && r.Cost == 1:
					if res := prepared.Take(keys[k], now); res.Allowed {
						record(k, res, 1)
					}
				default:
					if res := s.Take(&r, now); res.Allowed {
						record(k, res, r.Cost)
					}
				}
			}
			admitted[w] = own
		})
	}
	close(start)
	wg.Wait()
	for k := range keys {
		var all []int64
		for w := range workers {
			all = append(all, admitted[w][k]...)
		}
		slices.Sort(all)
		requireRateInEveryWindow(t, all, period, rate)
		if len(all) < 500 {
			t.Fatalf("key %d: only %d admitted: the run tests nothing", k, len(all))
		}
	}
}

// TestMaxLogUnitsIsTheHeaviestLogsWeight: maxLogUnits, by which a store
// chooses how many shards its logs spread over, is the weight of a log of
// stores.MaxSlidingLog events as the allocator makes it.
func TestMaxLogUnitsIsTheHeaviestLogsWeight(t *testing.T) {
	if w := newLog(0, stores.MaxSlidingLog).weight(); w != maxLogUnits {
		t.Fatalf("a log of %d events weighs %d, maxLogUnits is %d", stores.MaxSlidingLog, w, maxLogUnits)
	}
}

// TestSlidingLogShardsHoldTheHeaviestLog: a store's sliding logs spread
// over as many of its shards as leave each a share of the bound that holds
// a log of stores.MaxSlidingLog events, so that no shard keeps one over its
// share, and the logs of a full store weigh no more than the bound.
func TestSlidingLogShardsHoldTheHeaviestLog(t *testing.T) {
	for _, c := range []struct{ maxKeys, shards, logShards int }{
		{64 << 10, 64, 16}, {1 << 20, 1024, 256}, {1 << 20, 64, 64}, {4096, 4, 1}, {1024, 1, 1},
	} {
		s := New(Config{MaxKeys: c.maxKeys, Shards: c.shards})
		if len(s.logs) != c.logShards {
			t.Errorf("MaxKeys %d, %d shards: %d log shards, want %d", c.maxKeys, c.shards, len(s.logs), c.logShards)
		}
		r := Request{Alg: SlidingLog, Limit: Limit{Rate: stores.MaxSlidingLog, Period: 1e9, Capacity: stores.MaxSlidingLog}, Cost: 1}
		reached := make([]bool, len(s.logs))
		for i := range 32 * len(s.logs) {
			r.Key = strconv.Itoa(i)
			reached[s.logIndex(s.hash(&r))] = true
			if i < 2*len(s.logs) {
				s.Take(&r, 1)
			}
		}
		if i := slices.Index(reached, false); i >= 0 {
			t.Errorf("MaxKeys %d: no key reaches log shard %d of %d", c.maxKeys, i, len(s.logs))
		}
		used := 0
		for i := range s.logs {
			used += s.logs[i].used
		}
		if used > max(c.maxKeys, maxLogUnits) {
			t.Errorf("MaxKeys %d, %d shards: logs weigh %d keys", c.maxKeys, c.shards, used)
		}
	}
}
