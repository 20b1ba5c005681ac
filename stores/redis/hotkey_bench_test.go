package redisstore

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// hotBenchLimit admits every check of the benchmarks: the allow path, the
// one that writes.
var hotBenchLimit = ratelimit.PerSecond(1_000_000)

// hotBenchStore returns a Store on a new client of the shared Cluster, in
// split mode or not, with key already split.
func hotBenchStore(b testing.TB, split, coalesce bool, key string) (*Store, *redis.ClusterClient) {
	b.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sharedCluster.Addrs(), PoolSize: benchGoroutines})
	b.Cleanup(func() { c.Close() })
	opts := []Option{WithPrefix(uniquePrefix(b)), WithTimeout(10 * time.Second)}
	if !coalesce {
		opts = append(opts, WithoutCoalescing())
	}
	if split {
		opts = append(opts, WithHotKeys(HotKeys{Mode: HotSplit, Threshold: 100, Window: time.Minute, Shards: 3}))
	}
	s := newStore(c, opts...)
	req := stores.Request{Rule: "bench", Key: key, Limit: hotBenchLimit, Cost: 1}
	for range 200 { // past the threshold: split before the timer starts
		if _, err := s.Take(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	if split && s.hot.lookup(cacheKey{"bench", key, stores.GCRA}).split.Load() == nil {
		b.Fatal("the key was not split")
	}
	return s, c
}

// primaryScriptUsec returns the server µs each primary of the shared
// Cluster spent in script calls so far.
func primaryScriptUsec(tb testing.TB) []float64 {
	_, usec := primaryScripts(tb)
	return usec
}

// primaryScripts returns the script calls each primary of the shared
// Cluster ran so far, and the server µs they took.
func primaryScripts(tb testing.TB) (calls, usec []float64) {
	tb.Helper()
	for _, addr := range sharedCluster.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(context.Background(), "commandstats").Result()
		c.Close()
		if err != nil {
			tb.Fatal(err)
		}
		n, us := scriptStats(info)
		calls, usec = append(calls, n), append(usec, us)
	}
	return calls, usec
}

// busiestDelta returns the largest growth between two primaryScriptUsec.
func busiestDelta(before, after []float64) float64 {
	most := 0.0
	for i := range after {
		most = max(most, after[i]-before[i])
	}
	return most
}

// BenchmarkHotKeyCluster: 64 goroutines check one hot key on the shared
// 3-primary Cluster, on a single key ("single": the default Store) and
// split over 3 parts on 3 primaries ("split"), side by side in one run,
// with coalescing (the default) and without. busiest-primary-µs/op is the
// server time per check of the busiest primary (from INFO commandstats),
// and ceiling-checks/s its inverse: the throughput at which that primary
// saturates, which is what bounds a hot key when Redis, not the client,
// is the bottleneck.
//
//	go test -run '^$' -bench HotKeyCluster -benchtime 3s -count 5 ./stores/redis/
func BenchmarkHotKeyCluster(b *testing.B) {
	requireShared(b)
	for _, mode := range []struct {
		name            string
		split, coalesce bool
	}{{"single", false, true}, {"split", true, true}, {"single-nocoalesce", false, false}, {"split-nocoalesce", true, false}} {
		b.Run(mode.name, func(b *testing.B) {
			s, _ := hotBenchStore(b, mode.split, mode.coalesce, "203.0.113.77")
			before, busy := s.Stats().RoundTrips, primaryScriptUsec(b)
			req := stores.Request{Rule: "bench", Key: "203.0.113.77", Limit: hotBenchLimit, Cost: 1}
			var denied, failed atomic.Int64
			b.SetParallelism(max(1, benchGoroutines/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := s.Take(context.Background(), req)
					switch {
					case err != nil:
						failed.Add(1)
					case !res.Allowed:
						denied.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "checks/s")
			b.ReportMetric(float64(s.Stats().RoundTrips-before)/float64(b.N), "roundtrips/op")
			busiest := busiestDelta(busy, primaryScriptUsec(b)) / float64(b.N)
			b.ReportMetric(busiest, "busiest-primary-µs/op")
			b.ReportMetric(1e6/busiest, "ceiling-checks/s")
			if failed.Load() > 0 || denied.Load() > 0 {
				b.Fatalf("%d errors, %d denials on the allow path", failed.Load(), denied.Load())
			}
		})
	}
}

// TestHotSplitSpreadsTheLoad: 16 callers check one hot key, each check its
// own script call, on a single key and then split over 3 parts: split, the
// busiest primary runs at most 40% of the script calls (a third, plus the
// parts' imbalance), against all of them on one key, so that a hot key's
// ceiling, where one primary saturates, is 2.5 times higher or more. The
// test counts calls (INFO commandstats), which the machine's load cannot
// change; the server time per call, which it can, is in
// BenchmarkHotKeyCluster.
func TestHotSplitSpreadsTheLoad(t *testing.T) {
	requireShared(t)
	var share [2]float64
	for i, split := range []bool{false, true} {
		s, _ := hotBenchStore(t, split, false, "203.0.113.78")
		req := stores.Request{Rule: "bench", Key: "203.0.113.78", Limit: hotBenchLimit, Cost: 1}
		before, _ := primaryScripts(t)
		const callers, each = 16, 150
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range each {
					if res, err := s.Take(context.Background(), req); err != nil || !res.Allowed {
						t.Errorf("Take: %v, %v", res, err)
						return
					}
				}
			})
		}
		wg.Wait()
		after, _ := primaryScripts(t)
		share[i] = busiestDelta(before, after) / (callers * each)
		t.Logf("split %v: script calls per primary %v -> %v", split, before, after)
	}
	t.Logf("busiest primary's share of the checks: %.3f on one key, %.3f split (ratio %.2f)", share[0], share[1], share[0]/share[1])
	if share[0] < 0.99 || share[1] > 0.4 {
		t.Errorf("busiest primary's share: %.3f on one key (want all), %.3f split (want <= 0.4)", share[0], share[1])
	}
}
