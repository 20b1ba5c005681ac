package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// Coalescing must never add latency compared with no coalescing: a check
// waits for a batch only when every call the Store may make at once is in
// flight. These tests check that structure through Stats, which counts
// round trips and the checks they carried, rather than timing, so that a
// loaded machine cannot fail them. BenchmarkCoalescingLatency measures it.

// TestCoalescingFewCallersSendAlone: with at most maxInFlight concurrent
// callers, no check ever waits for a batch: every round trip carries one
// check, exactly as without coalescing.
func TestCoalescingFewCallersSendAlone(t *testing.T) {
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)), WithoutDeniedCache())
	if s.maxInFlight != defaultMaxInFlight {
		t.Fatalf("maxInFlight %d on a default pool, want %d", s.maxInFlight, defaultMaxInFlight)
	}
	for callers := 1; callers <= s.maxInFlight; callers++ {
		before := s.Stats()
		var wg sync.WaitGroup
		for w := range callers {
			wg.Go(func() {
				for i := range 200 {
					r := gcraReq(fmt.Sprintf("c%d-%d", w, i%7), ratelimit.PerSecond(1_000_000), 1)
					mustTakeErr(t, s, r)
					if i%5 == 0 { // Returns take the same path
						if err := s.Return(context.Background(), r); err != nil {
							t.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
		st := s.Stats()
		trips, sent := st.RoundTrips-before.RoundTrips, st.Sent-before.Sent
		if want := int64(callers * (200 + 40)); sent != want || trips != sent {
			t.Errorf("%d callers: %d round trips carried %d checks, want %d alone", callers, trips, sent, want)
		}
	}
}

// TestCoalescingQueuesOnlyWhenAllCallsInFlight holds every reply: the
// first maxInFlight checks go out alone at once, the next ones queue, and
// once a reply returns all the queued checks go out as one batch.
func TestCoalescingQueuesOnlyWhenAllCallsInFlight(t *testing.T) {
	requireShared(t)
	proxy := startProxy(t, sharedServer.Addr)
	client := faultClient(proxy.Addr())
	s := newStore(client, WithPrefix(uniquePrefix(t)), WithoutDeniedCache())
	mustTake(t, s, gcraReq("warm", ratelimit.PerMinute(5), 1)) // the script cached

	proxy.Hold()
	var wg sync.WaitGroup
	for i := range s.maxInFlight {
		wg.Go(func() { mustTakeErr(t, s, gcraReq(fmt.Sprintf("solo%d", i), ratelimit.PerMinute(5), 1)) })
	}
	waitLane(t, s, func(l *lane) bool { return l.inflight == s.maxInFlight })
	if st := s.Stats(); st.RoundTrips != 1 {
		t.Fatalf("%+v before any reply, want only the warm-up counted", st)
	}
	const queued = 10
	for i := range queued {
		wg.Go(func() { mustTakeErr(t, s, gcraReq(fmt.Sprintf("queued%d", i), ratelimit.PerMinute(5), 1)) })
	}
	waitLane(t, s, func(l *lane) bool { return len(l.queue) == queued })
	if got := s.single.inflight; got != s.maxInFlight {
		t.Errorf("%d calls in flight after queueing, want %d", got, s.maxInFlight)
	}
	proxy.Release()
	wg.Wait()
	want := Stats{RoundTrips: 1 + int64(s.maxInFlight) + 1, Sent: 1 + int64(s.maxInFlight) + queued}
	if st := s.Stats(); st != want {
		t.Errorf("%+v, want %+v: the warm-up, %d alone, one batch of %d", st, want, s.maxInFlight, queued)
	}
	waitLane(t, s, func(l *lane) bool { return l.inflight == 0 && len(l.queue) == 0 })
}

// TestCoalescingNeverExceedsPool: the cap follows the client's pool, so a
// check never waits for a connection (TestCoalescedWrongType shows a pool
// of one queueing the checks made while its one call is in flight).
func TestCoalescingNeverExceedsPool(t *testing.T) {
	requireShared(t)
	for _, pool := range []int{1, 2, defaultMaxInFlight + 6} {
		c := redis.NewClient(&redis.Options{Addr: sharedServer.Addr, PoolSize: pool})
		s := newStore(c)
		if want := min(pool, defaultMaxInFlight); s.maxInFlight != want {
			t.Errorf("pool of %d: maxInFlight %d, want %d", pool, s.maxInFlight, want)
		}
		c.Close()
	}
}

// TestCoalescingManyCallersBatch: with many more callers than calls in
// flight, checks share round trips, and the lane never has more than
// maxInFlight calls, nor more than batchCap batches, in flight.
func TestCoalescingManyCallersBatch(t *testing.T) {
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)), WithoutDeniedCache())
	stop := make(chan struct{})
	var peakCalls, peakBatches int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			s.singleMu.Lock()
			peakCalls = max(peakCalls, s.single.inflight)
			peakBatches = max(peakBatches, s.single.batches)
			s.singleMu.Unlock()
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 50 {
				mustTakeErr(t, s, gcraReq(fmt.Sprintf("m%d-%d", w, i%3), ratelimit.PerSecond(1_000_000), 1))
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	st := s.Stats()
	t.Logf("%+v: %.3f round trips per check; at most %d calls, %d batches in flight", st,
		float64(st.RoundTrips)/float64(st.Sent), peakCalls, peakBatches)
	if st.Sent != 64*50 || st.RoundTrips >= st.Sent {
		t.Errorf("64 callers: %d round trips for %d checks, want fewer round trips than checks", st.RoundTrips, st.Sent)
	}
	if peakCalls > s.maxInFlight || peakBatches > s.batchCap() || peakCalls == 0 {
		t.Errorf("peaks of %d calls and %d batches in flight, want at most %d and %d", peakCalls, peakBatches, s.maxInFlight, s.batchCap())
	}
}

// BenchmarkCoalescingLatency runs Take over 10,000 keys (the allow path)
// from a fixed number of goroutines, with coalescing off and on side by
// side, and reports the latency of a check (p50-µs, p99-µs), checks/s and
// round trips per check (roundtrips/op). Interleave runs to compare:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench CoalescingLatency -benchtime 3000x ./stores/redis/; done
func BenchmarkCoalescingLatency(b *testing.B) {
	limit := ratelimit.PerSecond(1_000_000)
	for _, callers := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, coalesce := range []bool{false, true} {
			name := fmt.Sprintf("callers=%d/coalescing=%s", callers, map[bool]string{false: "off", true: "on"}[coalesce])
			b.Run(name, func(b *testing.B) {
				client, counter := benchClient(b)
				opts := []Option{WithPrefix(uniquePrefix(b)), WithoutDeniedCache()}
				if !coalesce {
					opts = append(opts, WithoutCoalescing())
				}
				s := newStore(client, opts...)
				lat := measureLatency(b, callers, func(ctx context.Context, i int) error {
					req := stores.Request{Rule: "bench", Key: benchKeys[i%len(benchKeys)], Limit: limit, Cost: 1}
					_, err := s.Take(ctx, req)
					return err
				})
				b.ReportMetric(float64(counter.n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}

// measureLatency runs b.N checks from callers goroutines, each check
// numbered, and returns their latencies sorted.
func measureLatency(b *testing.B, callers int, check func(ctx context.Context, i int) error) []time.Duration {
	b.ReportAllocs()
	b.ResetTimer()
	lat, err := latencies(callers, b.N, check)
	b.StopTimer()
	if err != nil {
		b.Error(err)
	}
	return lat
}

// latencies runs n checks from callers goroutines, each check numbered, and
// returns their latencies sorted, or the first error.
func latencies(callers, n int, check func(ctx context.Context, i int) error) ([]time.Duration, error) {
	var next atomic.Int64
	var first atomic.Pointer[error]
	lat := make([]time.Duration, n)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				start := time.Now()
				if err := check(ctx, i*7919); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		return nil, *err
	}
	slices.Sort(lat)
	return lat, nil
}
