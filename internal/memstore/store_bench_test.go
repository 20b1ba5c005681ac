package memstore

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTake measures one check per algorithm, in parallel, on one hot
// key and on 10,000 keys, with the time advancing a microsecond per check
// of each goroutine (each reads its own clock, so that the benchmark shares
// no cache line between goroutines but the store's).
func BenchmarkTake(b *testing.B) {
	algs := []struct {
		name string
		alg  Alg
	}{{"gcra", GCRA}, {"sliding", SlidingWindow}, {"fixed", FixedWindow}, {"concurrency", Concurrency}, {"slidinglog", SlidingLog}}
	for _, a := range algs {
		for _, keys := range []int{1, 10_000} {
			b.Run(a.name+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				s := New(Config{})
				l := Limit{Rate: 1 << 30, Period: int64(time.Hour), Capacity: 1 << 30}
				if a.alg == SlidingLog { // a log holds Rate events: 100 per 5µs stands in
					l = Limit{Rate: 100, Period: int64(5 * time.Microsecond), Capacity: 100}
				}
				l.Interval = l.interval()
				parallelOnKeys(b, keys, func() func(string, int64) {
					r := Request{Alg: a.alg, Limit: l, Cost: 1}
					return func(key string, now int64) {
						r.Key = key
						if res := s.Take(&r, now); a.alg == Concurrency && res.Allowed {
							s.Return(&r, now)
						}
					}
				})
			})
		}
	}
}

// parallelOnKeys runs b in parallel over keys distinct keys, each goroutine
// checking with a check function of its own from newCheck, the time
// advancing a microsecond per check of each goroutine.
func parallelOnKeys(b *testing.B, keys int, newCheck func() func(key string, now int64)) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "10.0." + strconv.Itoa(i)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		check := newCheck()
		i := int(seq.Add(7919))
		now := start
		for pb.Next() {
			i++
			now += 1000
			check(names[i%keys], now)
		}
	})
}

// BenchmarkPreparedTake is BenchmarkTake through a Prepared check, as the
// middleware's direct path takes it, for the algorithms whose hot key is
// decided without the lock.
func BenchmarkPreparedTake(b *testing.B) {
	algs := []struct {
		name string
		alg  Alg
	}{{"gcra", GCRA}, {"sliding", SlidingWindow}, {"fixed", FixedWindow}}
	for _, a := range algs {
		for _, keys := range []int{1, 10_000} {
			b.Run(a.name+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				s := New(Config{})
				l := Limit{Rate: 1 << 30, Period: int64(time.Hour), Capacity: 1 << 30}
				p := s.Prepare(Request{Rule: "r", Alg: a.alg, Limit: l, Cost: 1})
				// as the direct path takes it: the Result where the caller
				// holds it (into), or returned (value)
				b.Run("into", func(b *testing.B) {
					parallelOnKeys(b, keys, func() func(string, int64) {
						var res Result
						return func(key string, now int64) {
							if p.TakeInto(key, now, &res); !res.Allowed {
								b.Fatal(res)
							}
						}
					})
				})
				b.Run("value", func(b *testing.B) {
					parallelOnKeys(b, keys, func() func(string, int64) {
						return func(key string, now int64) {
							if res := p.Take(key, now); !res.Allowed {
								b.Fatal(res)
							}
						}
					})
				})
			})
		}
	}
}

// BenchmarkTakeFreshKeys measures a flood of new keys into a full store
// (MaxKeys 65,536, every key limited for an hour): each check inserts a key
// and evicts one, the path that keeps a table within its bound.
func BenchmarkTakeFreshKeys(b *testing.B) {
	names := make([]string, 1<<18)
	for i := range names {
		names[i] = "10." + strconv.Itoa(i)
	}
	algs := []struct {
		name string
		alg  Alg
	}{{"gcra", GCRA}, {"sliding", SlidingWindow}, {"fixed", FixedWindow}, {"concurrency", Concurrency}}
	for _, a := range algs {
		b.Run(a.name, func(b *testing.B) {
			s := New(Config{MaxKeys: 1 << 16})
			l := Limit{Rate: 5, Period: int64(time.Hour), Capacity: 5}
			l.Interval = l.interval()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			r := Request{Alg: a.alg, Limit: l, Cost: 1}
			for i := range 1 << 17 { // fill past the bound
				r.Key = names[i]
				s.Take(&r, now)
			}
			b.ReportAllocs()
			i := 1 << 17
			for b.Loop() {
				r.Key = names[i&(len(names)-1)]
				i++
				now += 1000
				s.Take(&r, now)
			}
		})
	}
}
