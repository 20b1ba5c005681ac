package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// BenchmarkPacingJitter measures, on the real clock, how far from the
// ideal grid paced requests are served: b.N requests arrive at once at a
// rule of 100 rps with no burst, and the k-th served should start k*10ms
// after the first. It reports the p50, p99 and largest deviation in
// milliseconds (the timer's wake-up and the scheduler's latency; the
// schedule itself is exact, see TestPacedRequestsAreServedOnTheRateGrid),
// and the most requests served in any 1-second window: rate + burst (101)
// plus what the timers' lateness squeezes in (a request served late and
// the next on time come closer than 10ms). The admissions themselves, the
// reserved moments, never exceed rate + burst: the store decides them. Run
// with a fixed count:
//
//	go test -run '^$' -bench PacingJitter -benchtime 300x .
func BenchmarkPacingJitter(b *testing.B) {
	var mu sync.Mutex
	served := make([]time.Time, 0, b.N)
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(100).WithBurst(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Hour, MaxWaiting: b.N}}})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			now := time.Now()
			mu.Lock()
			served = append(served, now)
			mu.Unlock()
		}))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range b.N {
		wg.Go(func() {
			if code, _, _ := serve(h, keyed("k")); code != 200 {
				b.Errorf("status %d", code)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.SortFunc(served, func(a, c time.Time) int { return a.Compare(c) })
	dev := make([]float64, len(served))
	for k, at := range served {
		d := at.Sub(served[0]) - time.Duration(k)*10*time.Millisecond
		dev[k] = float64(d.Abs()) / float64(time.Millisecond)
	}
	slices.Sort(dev)
	b.ReportMetric(dev[len(dev)/2], "p50-ms")
	b.ReportMetric(dev[len(dev)*99/100], "p99-ms")
	b.ReportMetric(dev[len(dev)-1], "max-ms")
	most := 0
	for i, j := 0, 0; i < len(served); i++ {
		for served[i].Sub(served[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	b.ReportMetric(float64(most), "served-max-per-s")
}

// BenchmarkPacedRejection measures the rejection of a paced request that
// would wait longer than MaxDelay: it must answer at once (its ns/op is the
// whole cost, far below a millisecond), not after a wait.
func BenchmarkPacedRejection(b *testing.B) {
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerHour(1).WithBurst(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Second}}})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve(h, keyed("k")) // the one admission of the hour: the next wait is an hour
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := keyed("k")
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 429 {
				b.Errorf("status %d; want 429", w.Code)
				return
			}
		}
	})
}
