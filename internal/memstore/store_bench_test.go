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
	}{{"gcra", GCRA}, {"sliding", SlidingWindow}, {"fixed", FixedWindow}, {"concurrency", Concurrency}}
	for _, a := range algs {
		for _, keys := range []int{1, 10_000} {
			b.Run(a.name+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				s := New(Config{})
				names := make([]string, keys)
				for i := range names {
					names[i] = "10.0." + strconv.Itoa(i)
				}
				l := Limit{Rate: 1 << 30, Period: int64(time.Hour), Capacity: 1 << 30}
				l.Interval = l.interval()
				start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
				var seq atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					now := start
					r := Request{Alg: a.alg, Limit: l, Cost: 1}
					for pb.Next() {
						i++
						r.Key = names[i%keys]
						now += 1000
						res := s.Take(&r, now)
						if a.alg == Concurrency && res.Allowed {
							s.Return(&r, now)
						}
					}
				})
			})
		}
	}
}
