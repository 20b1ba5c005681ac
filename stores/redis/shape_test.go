package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Pacing (Request.MaxDelay) and settlements (Request.Force, window Slot
// tokens) on the paths the conformance suite cannot see: the denied
// cache, coalesced batches, leases and split keys, and several instances.

func paced(r stores.Request, d time.Duration) stores.Request {
	r.MaxDelay = d
	return r
}

func forced(r stores.Request, cost int) stores.Request {
	r.Cost, r.Force = cost, true
	return r
}

// TestDeniedCacheLetsReservationsThrough: while a plain check of a key is
// answered from the denied cache, a check with a MaxDelay that a
// reservation admits goes to Redis and is admitted; a forced take goes to
// Redis, is charged, and drops the cached denial, whose RetryAfter the
// debt made too short.
func TestDeniedCacheLetsReservationsThrough(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	mem := memory.New(memory.WithClock(clock))
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)))
	req := gcraReq("k", ratelimit.PerSecond(10).WithBurst(1), 1) // one per 100ms
	check := func(what string, r stores.Request, wantHit bool) stores.Result {
		t.Helper()
		before := s.Stats()
		got, err := s.Take(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mem.Take(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !sameResult(&entry{req: r, exact: true}, r.Force, got, want) {
			t.Fatalf("%s:\n redis  %+v\n memory %+v", what, got, want)
		}
		after := s.Stats()
		if hit := after.DeniedCacheHits > before.DeniedCacheHits; hit != wantHit {
			t.Fatalf("%s: denied cache hit %v, want %v", what, hit, wantHit)
		}
		if !wantHit && after.RoundTrips != before.RoundTrips+1 {
			t.Fatalf("%s: %d round trips, want 1", what, after.RoundTrips-before.RoundTrips)
		}
		return got
	}
	check("fill", req, false)
	check("first denial", req, false)
	clock.Advance(10 * time.Millisecond)
	check("cached denial", req, true)
	if res := check("reservation", paced(req, 250*time.Millisecond), false); !res.Allowed || res.Delay != 90*time.Millisecond {
		t.Fatalf("reservation while cached: %+v; want allowed with Delay 90ms", res)
	}
	check("cached denial after the reservation", req, false) // the reservation dropped the entry
	check("cached again", req, true)
	if res := check("forced", forced(req, 3), false); res.Allowed || res.RetryAfter != 490*time.Millisecond {
		t.Fatalf("forced take of 3: %+v; want charged, next unit in 490ms", res)
	}
	// The cached denial said 190ms; the debt pushed the key to 490ms.
	if res := check("after the debt", req, false); res.RetryAfter != 490*time.Millisecond {
		t.Fatalf("plain check after the debt: %+v; want RetryAfter 490ms", res)
	}
	check("cached after the debt", req, true)
}

// TestCoalescedBatchDecidesEachShapedRequestAlone: plain, paced and forced
// requests and slotted returns of the same keys in one coalesced script
// call each get their own decision, in order, as the memory store gives
// them one by one: none is merged into another's.
func TestCoalescedBatchDecidesEachShapedRequestAlone(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.Epoch().Add(17 * time.Second))
	mem := memory.New(memory.WithClock(clock))
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)))
	g := gcraReq("g", ratelimit.PerSecond(10).WithBurst(2), 1)
	fixed := withAlg(gcraReq("f", ratelimit.PerMinute(10), 2), stores.FixedWindow)
	sliding := withAlg(gcraReq("s", ratelimit.PerMinute(10), 2), stores.SlidingWindow)

	// A first take of each window: its Slot is what the batch settles.
	memSlot, redisSlot := map[string]uint64{}, map[string]uint64{}
	for _, r := range []stores.Request{fixed, sliding} {
		want, _ := mem.Take(ctx, r)
		got := mustTake(t, s, r)
		if !want.Allowed || !got.Allowed || !sameSlot(r.Algorithm, got.Slot, want.Slot) {
			t.Fatalf("first take of %v: redis %+v, memory %+v", r.Algorithm, got, want)
		}
		memSlot[r.Key], redisSlot[r.Key] = want.Slot, got.Slot
	}
	clock.Advance(61 * time.Second) // the sliding window is now the previous one; the fixed one ended

	type step struct {
		req  stores.Request
		kind opKind
	}
	slotted := func(r stores.Request) stores.Request { r.Slot = 1; return r } // replaced per store
	steps := []step{
		{g, opTake},
		{g, opTake},
		{g, opTake},                              // denied
		{paced(g, 250*time.Millisecond), opTake}, // reserved, Delay 100ms
		{paced(g, 150*time.Millisecond), opTake}, // would wait 200ms: denied
		{forced(g, 4), opTake},                   // charged although it does not fit
		{paced(g, time.Second), opTake},          // behind the debt: still within 1s
		{withCost(g, 1), opReturn},
		{withCost(g, 0), opTake},
		{forced(slotted(sliding), 4), opTake}, // into the previous window
		{withCost(slotted(sliding), 1), opReturn},
		{withCost(sliding, 0), opTake},
		{sliding, opTake},                   // the current window, with a new Slot
		{forced(slotted(fixed), 5), opTake}, // an ended window: nothing changes
		{forced(fixed, 12), opTake},         // the current window: over the rate
		{withCost(fixed, 0), opTake},
	}
	ops := make([]*op, len(steps))
	now := at(clock.Now())
	for i, st := range steps {
		r := st.req
		if r.Slot != 0 {
			r.Slot = redisSlot[r.Key]
		}
		ops[i] = &op{key: stateKey(s.prefix, &r), req: r, kind: st.kind, now: now}
	}
	before := s.Stats().RoundTrips
	s.sendGroup(ctx, ops)
	if n := s.Stats().RoundTrips - before; n != 1 {
		t.Fatalf("%d round trips for one batch", n)
	}
	for i, st := range steps {
		r := st.req
		if r.Slot != 0 {
			r.Slot = memSlot[r.Key]
		}
		if ops[i].err != nil {
			t.Fatalf("step %d: %v", i, ops[i].err)
		}
		if st.kind == opReturn {
			if err := mem.Return(ctx, r); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := mem.Take(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		got := takeResult(&ops[i].req, ops[i].vals[:])
		e := entry{req: r, exact: true}
		if !sameResult(&e, r.Force, got, want) {
			t.Fatalf("step %d (%v cost %d, max delay %v, forced %v):\n redis  %+v\n memory %+v", i, r.Algorithm, r.Cost, r.MaxDelay, r.Force, got, want)
		}
	}
	if res := takeResult(&ops[3].req, ops[3].vals[:]); res.Delay != 100*time.Millisecond {
		t.Errorf("the reservation in the batch: %+v; want Delay 100ms", res)
	}
}

func withCost(r stores.Request, cost int) stores.Request {
	r.Cost = cost
	return r
}

// TestLeaseNeverServesShapedRequests: with a lease of the key in hand, a
// paced or forced check still goes to Redis (a lease's units are spent
// now, at no delay, and a debt must reach the shared state).
func TestLeaseNeverServesShapedRequests(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)), WithLease(0.5, time.Minute))
	other := newStore(standaloneClient(t), WithClock(clock), WithPrefix(s.prefix), WithoutCoalescing())
	req := gcraReq("k", ratelimit.PerSecond(10), 1) // capacity 10, lease of 5
	mustTake(t, s, req)                             // leases 5: 1 spent, 4 held
	before := s.Stats()
	res := mustTake(t, s, paced(req, time.Second))
	if !res.Allowed || res.Remaining != 4 {
		t.Fatalf("paced take with a lease held: %+v; want Redis's answer, 4 left", res)
	}
	res = mustTake(t, s, forced(req, 2))
	if !res.Allowed || res.Remaining != 2 {
		t.Fatalf("forced take with a lease held: %+v; want Redis's answer, 2 left", res)
	}
	after := s.Stats()
	if after.LeaseHits != before.LeaseHits || after.RoundTrips != before.RoundTrips+2 {
		t.Fatalf("stats %+v -> %+v: want two round trips and no lease hit", before, after)
	}
	// Both reached the shared state: another instance sees them.
	if res := mustTake(t, other, withCost(req, 0)); res.Remaining != 2 {
		t.Fatalf("another instance sees %+v; want 2 left", res)
	}
	// The lease still serves plain checks.
	mustTake(t, s, req)
	if s.Stats().LeaseHits != after.LeaseHits+1 {
		t.Fatalf("the lease stopped serving plain checks: %+v", s.Stats())
	}
}

// TestHotLeaseNeverServesShapedRequests: a hot key in HotLease mode
// sends paced and forced checks straight to Redis, and they do not count
// towards making a key hot.
func TestHotLeaseNeverServesShapedRequests(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)), WithClock(clock),
		WithHotKeys(HotKeys{Mode: HotLease, Threshold: 20, Window: time.Second, LeaseFraction: 0.1}))
	req := gcraReq("hot", ratelimit.PerSecond(1000), 1)
	for range 100 { // paced checks alone never make the key hot
		mustTake(t, s, paced(req, time.Second))
	}
	if st := s.Stats(); st.LeaseHits != 0 || st.RoundTrips != 100 {
		t.Fatalf("100 paced checks: %+v; want 100 round trips, no lease", st)
	}
	for range 40 {
		mustTake(t, s, req)
	}
	hits := s.Stats().LeaseHits
	if hits == 0 {
		t.Fatal("the key did not become hot")
	}
	trips := s.Stats().RoundTrips
	for range 5 {
		mustTake(t, s, paced(req, time.Second))
		mustTake(t, s, forced(req, 1))
	}
	if st := s.Stats(); st.LeaseHits != hits || st.RoundTrips != trips+10 {
		t.Fatalf("10 shaped checks of a hot key: %+v; want 10 round trips, no lease hit", st)
	}
}

// TestHotSplitShapedRequests: on a split key a forced take (a settlement)
// is charged to a part, never lost and never written into the marker; a
// paced check is denied for the marker's time (a split key takes no
// reservations) and leaves the marker alone.
func TestHotSplitShapedRequests(t *testing.T) {
	hot := stores.Request{Rule: "api", Key: "198.51.100.93", Limit: ratelimit.PerSecond(300), Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	ctx := context.Background()
	clock.Advance(100 * time.Millisecond) // the emptied parts refill 30 units
	peek := withCost(hot, 0)
	for i, s := range peers {
		before := mustTake(t, s, peek).Remaining
		res, err := s.Take(ctx, forced(hot, 6))
		if err != nil || isMarker(&res) {
			t.Fatalf("store %d: forced take of a split key: %+v, %v", i, res, err)
		}
		if after := mustTake(t, s, peek).Remaining; after != before-6 {
			t.Fatalf("store %d: the parts hold %d after a forced take of 6 from %d", i, after, before)
		}
		res, err = s.Take(ctx, paced(hot, time.Minute))
		if err != nil || res.Allowed || res.RetryAfter > time.Hour || res.RetryAfter <= 0 {
			t.Fatalf("store %d: paced take of a split key: %+v, %v; want denied for the marker's time", i, res, err)
		}
		n, left, err := s.readMarker(ctx, s.now(), stateKey(s.prefix, &hot))
		if err != nil || n != 3 || left <= 0 {
			t.Fatalf("store %d: marker of %d parts, %v left, %v; want 3 parts, live", i, n, left, err)
		}
	}
}

// TestPacedReservationsFourInstances: four Stores on separate clients
// make paced reservations on one key at once, and give random ones back,
// with their tokens, before they act, while the others keep reserving;
// the times the reservations still held act at (the request's time plus
// its Delay) never hold more than Capacity + Rate units in any second,
// nor more than one exact GCRA key allows in any span. A reservation given
// back while later ones wait leaves a hole: its turn must not go to a
// newcomer while the reservation behind it keeps its own.
func TestPacedReservationsFourInstances(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := uniquePrefix(t)
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			lim := ratelimit.PerSecond(20).WithBurst(5)
			req := paced(gcraReq("paced", lim, 1), 2*time.Second)
			type reservation struct {
				act  int64 // µs since the epoch
				cost int
				slot uint64
			}
			var mu sync.Mutex
			var acts []int64 // µs since the epoch, one per unit held
			var delayed, denied, given int
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			fail := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			for w := range 4 {
				s := newStore(b.client(t), WithClock(clock), WithPrefix(prefix))
				rng := rand.New(rand.NewPCG(uint64(w), 5))
				wg.Go(func() {
					var held []reservation
					for i := range 90 {
						if (i+w)%3 == 0 {
							clock.Advance(time.Duration((i*7+w)%9) * 4 * time.Millisecond)
						}
						now := clock.Now()
						us := now.Sub(ratelimittest.Epoch()).Microseconds()
						if i%5 == 4 && len(held) > 0 { // give one back before it acts
							j := rng.IntN(len(held))
							if r := held[j]; r.act > us {
								ret := withCost(req, r.cost)
								ret.Slot = r.slot
								if err := s.ReturnAt(ctx, now, ret); err != nil {
									fail(err)
									return
								}
								held = append(held[:j], held[j+1:]...)
								mu.Lock()
								given++
								mu.Unlock()
								continue
							}
						}
						r := withCost(req, 1+(i+w)%2)
						res, err := s.TakeAt(ctx, now, r)
						if err != nil {
							fail(err)
							return
						}
						mu.Lock()
						switch {
						case res.Allowed:
							held = append(held, reservation{now.Add(res.Delay).Sub(ratelimittest.Epoch()).Microseconds(), r.Cost, res.Slot})
							if res.Delay > 0 {
								delayed++
							}
						case res.RetryAfter <= req.MaxDelay:
							fail(fmt.Errorf("denied with RetryAfter %v within MaxDelay %v", res.RetryAfter, req.MaxDelay))
						default:
							denied++
						}
						mu.Unlock()
					}
					mu.Lock()
					for _, r := range held {
						for range r.cost {
							acts = append(acts, r.act)
						}
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			slices.Sort(acts)
			if got, bound := maxInWindow(acts, 1_000_000), lim.Rate+lim.Capacity(); got > bound {
				t.Errorf("%d units act within one second, bound %d", got, bound)
			}
			checkGCRABound(t, acts, lim)
			// The schedule must have been saturated, and reservations given
			// back, for the bound to mean anything.
			if delayed == 0 || denied == 0 || given < 15 || len(acts) < 8 {
				t.Errorf("%d units held (%d reservations delayed), %d denied, %d given back: the key was not saturated", len(acts), delayed, denied, given)
			}
			t.Logf("%d units held, %d delayed, %d denied, %d given back", len(acts), delayed, denied, given)
		})
	}
}
