package redisstore

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// waitGoroutines polls until the number of goroutines is back to at most
// baseline, and fails the test with a dump if it is not within 30s (a
// leak is the failure, not the time goroutines take to exit on a loaded
// machine).
func waitGoroutines(t testing.TB, baseline int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling for goroutines to exit
	}
}

// silentServer starts a TCP listener that accepts connections and never
// answers, as a hung Redis would, and returns its address. Cleanup closes
// the listener and every connection.
func silentServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // never read from: the server is silent
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestCoalescing runs many concurrent checks on one hot key and on
// distinct keys, with the clock stopped: the decisions are exactly those
// of sequential calls (the allowed ones report every Remaining from
// capacity-1 down to 0 once), and they travel in fewer round trips.
func TestCoalescing(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			s := newStore(b.client(t), WithClock(clock), WithPrefix(uniquePrefix(t)))
			const workers, each, capacity = 32, 12, 200
			for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
				req := withAlg(gcraReq("hot", ratelimit.Limit{Rate: capacity, Period: time.Hour}, 1), alg)
				var mu sync.Mutex
				var remaining []int
				denied, hot := 0, 0
				for w := range workers {
					for i := range each {
						if (w+i)%5 != 0 {
							hot++
						}
					}
				}
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := range each {
							r := req
							if (w+i)%5 == 0 { // distinct keys in the same batches
								r.Key = "cold" + string(rune('a'+w))
							}
							res, err := s.Take(context.Background(), r)
							if err != nil {
								t.Error(err)
								return
							}
							if r.Key != req.Key {
								continue
							}
							mu.Lock()
							if res.Allowed {
								remaining = append(remaining, res.Remaining)
							} else {
								denied++
							}
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				slices.Sort(remaining)
				if len(remaining) != capacity || denied != hot-capacity {
					t.Fatalf("%v: %d allowed, %d denied of %d; want %d allowed", alg, len(remaining), denied, hot, capacity)
				}
				for i, r := range remaining {
					if r != i {
						t.Fatalf("%v: allowed Remaining values %v, want 0..%d once each", alg, remaining, capacity-1)
					}
				}
			}
			st := s.Stats()
			t.Logf("%+v: %.1f checks per round trip", st, float64(st.Sent)/float64(st.RoundTrips))
			if st.RoundTrips >= st.Sent {
				t.Errorf("no coalescing: %d round trips for %d checks", st.RoundTrips, st.Sent)
			}
		})
	}
}

// TestCoalescedReturns: Returns are coalesced with Takes, and Concurrency
// slots never exceed the limit.
func TestCoalescedReturns(t *testing.T) {
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)))
	cc := withAlg(gcraReq("slots", stores.Limit{Rate: 4, Period: time.Minute}, 1), stores.Concurrency)
	var mu sync.Mutex
	inflight, peak, acquired := 0, 0, 0
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for range 30 {
				res, err := s.Take(context.Background(), cc)
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Allowed {
					continue
				}
				mu.Lock()
				inflight++
				acquired++
				peak = max(peak, inflight)
				inflight--
				mu.Unlock()
				if err := s.Return(context.Background(), cc); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if peak > 4 || acquired < 4 {
		t.Errorf("peak %d in flight (limit 4), %d acquired", peak, acquired)
	}
}

// TestCoalescedWrongType: a key holding another type fails its own check,
// not the others coalesced with it.
func TestCoalescedWrongType(t *testing.T) {
	ctx := context.Background()
	requireShared(t)
	proxy := startProxy(t, sharedServer.Addr)
	// One connection, so one call in flight: the checks made while it is
	// held queue, and go out together, as one batch, once it returns.
	client := faultClient(proxy.Addr(), func(o *redis.Options) { o.PoolSize = 1 })
	prefix := uniquePrefix(t)
	s := newStore(client, WithPrefix(prefix))
	bad := gcraReq("bad", ratelimit.PerMinute(5), 1)
	direct := standaloneClient(t)
	direct.HSet(ctx, stateKey(prefix, &bad), "x", "y")
	direct.Expire(ctx, stateKey(prefix, &bad), time.Minute)
	mustTake(t, s, gcraReq("warm", ratelimit.PerMinute(5), 1)) // a warm connection, the script cached

	proxy.Hold()
	var wg sync.WaitGroup
	wg.Go(func() { mustTakeErr(t, s, gcraReq("blocker", ratelimit.PerMinute(5), 1)) })
	waitLane(t, s, func(l *lane) bool { return l.inflight == 1 })
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			r := gcraReq("good"+string(rune('a'+i)), ratelimit.PerMinute(5), 1)
			if i == 0 {
				r = bad
			}
			_, errs[i] = s.Take(ctx, r)
		})
	}
	waitLane(t, s, func(l *lane) bool { return len(l.queue) == len(errs) })
	proxy.Release()
	wg.Wait()
	if errs[0] == nil || !strings.HasPrefix(errs[0].Error(), "ratelimit: redis: ") {
		t.Errorf("wrong-type key: %v, want a ratelimit: redis: error", errs[0])
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("request %d coalesced with a wrong-type key: %v", i+1, err)
		}
	}
	// The warm-up, the blocker, and one batch of the ten.
	if st := s.Stats(); st.RoundTrips != 3 || st.Sent != 12 {
		t.Errorf("%+v, want 3 round trips carrying 12 checks", st)
	}
}

// mustTakeErr is mustTake from a goroutine other than the test's.
func mustTakeErr(t *testing.T, s *Store, req stores.Request) {
	if _, err := s.Take(context.Background(), req); err != nil {
		t.Error(err)
	}
}

// waitLane waits until the single lane of s satisfies cond: an event
// (calls in flight, checks queued), polled under the lane's lock.
func waitLane(t *testing.T, s *Store, cond func(*lane) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.singleMu.Lock()
		ok := cond(&s.single)
		s.singleMu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lane never reached the expected state")
		}
		time.Sleep(time.Millisecond) // polling for the event
	}
}

// TestCoalescingDeadlines: on a server that never answers, a caller whose
// ctx expires gets ctx's error at once, whether its check was in flight or
// queued; a caller without a deadline is bounded by the batch timeout; no
// goroutine is left behind.
func TestCoalescingDeadlines(t *testing.T) {
	addr := silentServer(t)
	baseline := runtime.NumGoroutine()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true, PoolSize: 4})
	s := newStore(client, WithBatchTimeout(300*time.Millisecond))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			budget := 50 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			if i == 19 {
				ctx = context.Background() // no deadline: the batch timeout applies
				budget = 300 * time.Millisecond
				time.Sleep(5 * time.Millisecond) // queue behind the first
			}
			start := time.Now()
			res, err := s.Take(ctx, gcraReq("k", ratelimit.PerSecond(10), 1))
			d := time.Since(start)
			if err == nil || res != (stores.Result{}) {
				t.Errorf("Take on a silent server = %+v, %v", res, err)
			}
			if d > budget+time.Second { // a generous margin for a loaded machine; go-redis alone waits 3s
				t.Errorf("Take took %v with a budget of %v", d, budget)
			}
		})
	}
	wg.Wait()
	client.Close()
	waitGoroutines(t, baseline)
}

// TestNoGoroutineLeak: a Store used under concurrent load and then left
// leaves no goroutine behind once its client is closed.
func TestNoGoroutineLeak(t *testing.T) {
	requireShared(t)
	baseline := runtime.NumGoroutine()
	client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
	s := newStore(client, WithPrefix(uniquePrefix(t)), WithLease(0.1, time.Second))
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 20 {
				req := gcraReq("k"+string(rune('a'+(i+j)%7)), ratelimit.PerMinute(50), 1)
				req.Algorithm = stores.Algorithm(j % 3)
				if _, err := s.Take(context.Background(), req); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	client.Close()
	waitGoroutines(t, baseline)
}

// TestDeniedCache: a key denied with nothing left is answered locally,
// without a round trip, with exactly the Result Redis would give, until one
// unit is back; a Return through the Store forgets it.
func TestDeniedCache(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	for _, alg := range []stores.Algorithm{stores.GCRA, stores.SlidingWindow, stores.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			mem := memory.New(memory.WithClock(clock))
			prefix := uniquePrefix(t)
			s := newStore(client, WithClock(clock), WithPrefix(prefix))
			other := newStore(client, WithClock(clock), WithPrefix(prefix)) // another instance
			req := withAlg(gcraReq("k", stores.Limit{Rate: 3, Period: time.Minute}, 3), alg)
			check := func(what string, cost int, wantHit bool) stores.Result {
				t.Helper()
				r := req
				r.Cost = cost
				before := s.Stats()
				got, err := s.Take(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := mem.Take(ctx, r)
				if !sameResult(&entry{req: r, exact: true}, r.Force, got, want) {
					t.Fatalf("%s:\n redis  %+v\n memory %+v", what, got, want)
				}
				after := s.Stats()
				if hit := after.DeniedCacheHits > before.DeniedCacheHits; hit != wantHit {
					t.Fatalf("%s: cache hit %v, want %v", what, hit, wantHit)
				}
				if wantHit && after.RoundTrips != before.RoundTrips {
					t.Fatalf("%s: a cache hit made a round trip", what)
				}
				return got
			}
			check("fill", 3, false)
			check("first denial", 1, false)
			clock.Advance(time.Second)
			check("cached denial", 1, true)
			check("cached denial, cost 2", 2, alg != stores.SlidingWindow)
			check("peek", 0, false)
			// Another instance's refund is not seen: this one still denies
			// (the documented inexactness), until a Return of its own.
			if err := other.Return(ctx, withAlg(gcraReq("k", req.Limit, 1), alg)); err != nil {
				t.Fatal(err)
			}
			if res, _ := s.Take(ctx, withAlg(gcraReq("k", req.Limit, 1), alg)); res.Allowed {
				t.Fatalf("denied cache missed after a remote Return: %+v", res)
			}
			if err := mem.Return(ctx, withAlg(gcraReq("k", req.Limit, 1), alg)); err != nil {
				t.Fatal(err)
			}
			if err := s.Return(ctx, withAlg(gcraReq("k", req.Limit, 0), alg)); err != nil {
				t.Fatal(err)
			}
			check("after a local Return", 1, false) // takes the refunded unit
			check("denied again", 1, false)
			clock.Advance(10 * time.Second)
			check("cached", 1, true)
			clock.Advance(3 * time.Minute)
			check("after the wait", 1, false)
		})
	}
}

// TestLease: a GCRA lease of 10 units serves 10 checks with one round trip;
// an expired lease is replaced; other algorithms are unaffected.
func TestLease(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithClock(clock), WithPrefix(uniquePrefix(t)), WithLease(0.1, time.Second))
	req := gcraReq("k", ratelimit.PerMinute(100), 1)
	for i := range 10 {
		res := mustTake(t, s, req)
		if !res.Allowed || res.Remaining != 99-i {
			t.Fatalf("take %d: %+v, want allowed with %d remaining", i, res, 99-i)
		}
	}
	if st := s.Stats(); st.RoundTrips != 1 || st.LeaseHits != 9 {
		t.Fatalf("10 leased takes: %+v, want 1 round trip and 9 lease hits", st)
	}
	clock.Advance(2 * time.Second) // the lease expired; its Redis units stay taken
	res := mustTake(t, s, req)
	if !res.Allowed || s.Stats().RoundTrips != 2 {
		t.Fatalf("after expiry: %+v, %+v", res, s.Stats())
	}
	// A cost above the lease takes a new one of at least that cost.
	big := gcraReq("k", ratelimit.PerMinute(100), 15)
	if res := mustTake(t, s, big); !res.Allowed {
		t.Fatalf("cost 15: %+v", res)
	}
	if st := s.Stats(); st.RoundTrips != 3 {
		t.Fatalf("cost 15: %+v, want a third round trip", st)
	}
	other := withAlg(gcraReq("w", ratelimit.PerMinute(100), 1), stores.FixedWindow)
	mustTake(t, s, other)
	mustTake(t, s, other)
	if st := s.Stats(); st.RoundTrips != 5 {
		t.Fatalf("fixed window with lease mode on: %+v, want one round trip each", st)
	}
}

// TestWithCoalescingSetsTheBatches: WithCoalescing turns coalescing back on
// after WithoutCoalescing, with the batch size given (DefaultMaxBatch for
// 0) and the wait given, and refuses negative values at start-up. No
// server is needed: New does not dial.
func TestWithCoalescingSetsTheBatches(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	for _, tc := range []struct {
		batch     int
		wait      time.Duration
		wantBatch int
	}{{0, time.Millisecond, DefaultMaxBatch}, {8, 0, 8}} {
		s := New(client, WithoutCoalescing(), WithCoalescing(tc.batch, tc.wait))
		if !s.coalesce || s.maxBatch != tc.wantBatch || s.maxWait != tc.wait {
			t.Errorf("WithCoalescing(%d, %v): coalesce %v, batch %d, wait %v; want on, %d, %v",
				tc.batch, tc.wait, s.coalesce, s.maxBatch, s.maxWait, tc.wantBatch, tc.wait)
		}
	}
	if s := New(client, WithoutCoalescing()); s.coalesce {
		t.Error("WithoutCoalescing left coalescing on")
	}
	for _, bad := range [][2]int{{-1, 0}, {0, -1}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "redisstore: WithCoalescing") {
					t.Errorf("WithCoalescing(%d, %d): panic %v, want a redisstore: message", bad[0], bad[1], r)
				}
			}()
			WithCoalescing(bad[0], time.Duration(bad[1]))
		}()
	}
}
