package fair_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkUncontended measures Admit plus done, Acquire plus Release, and
// a request through Handler, when a seat is free and nobody waits, beside
// the simplest concurrency cap, a buffered-channel semaphore, in the same
// run: serially (one goroutine) and in parallel.
func BenchmarkUncontended(b *testing.B) {
	r := httptest.NewRequest("GET", "/api", nil)
	w := ratelimittest.NewDiscardWriter()
	sched := fair.New(fair.Preset(1<<20, ratelimit.ByIP()))
	sched.Admit(w, r) // warm
	h := sched.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	sem := make(chan struct{}, 1<<20)
	variants := []struct {
		name string
		op   func()
	}{
		{"fair", func() {
			done, ok := sched.Admit(w, r)
			if !ok {
				panic("refused")
			}
			done()
		}},
		{"fair-acquire", func() {
			s, ok := sched.Acquire(w, r)
			if !ok {
				panic("refused")
			}
			s.Release()
		}},
		{"fair-handler", func() { h.ServeHTTP(w, r) }},
		{"chan-semaphore", func() {
			sem <- struct{}{}
			<-sem
		}},
	}
	for _, v := range variants {
		b.Run(v.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.op()
			}
		})
		b.Run(v.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					v.op()
				}
			})
		})
	}
}
