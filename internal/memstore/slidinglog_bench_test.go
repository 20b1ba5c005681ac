package memstore

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkSlidingLogTake measures SlidingLog checks in parallel on one hot
// key and on 10,000 keys, stamped by the system clock as the middleware's
// are (BenchmarkTake's clocks, a microsecond a check, make the hot key's
// goroutines decide at one another's floor), allowed (100 per 5µs, as the
// bench module's row) and denied (a limit of 1 a minute).
func BenchmarkSlidingLogTake(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit Limit
	}{
		{"allow", Limit{Rate: 100, Period: int64(5 * time.Microsecond), Capacity: 100}},
		{"deny", Limit{Rate: 1, Period: int64(time.Minute), Capacity: 1}},
	} {
		for _, keys := range []int{1, 10_000} {
			b.Run(c.name+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				s := New(Config{})
				names := make([]string, keys)
				for i := range names {
					names[i] = "10.0." + strconv.Itoa(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := Request{Alg: SlidingLog, Limit: c.limit, Cost: 1}
					for i := 0; pb.Next(); i++ {
						r.Key = names[i%keys]
						s.Take(&r, time.Now().UnixNano())
					}
				})
			})
		}
	}
}
