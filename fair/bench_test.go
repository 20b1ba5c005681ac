package fair_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkUncontended measures Admit plus done when a seat is free and
// nobody waits, beside the simplest concurrency cap, a buffered-channel
// semaphore, in the same run: serially (one goroutine) and in parallel.
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

// TestUncontendedHandlerDoesNotAllocate: through Handler, the uncontended
// path (a seat free, nobody waiting) does not allocate, with an observer or
// without; Admit allocates only its one-shot done function (the function
// and its used flag).
func TestUncontendedHandlerDoesNotAllocate(t *testing.T) {
	r := httptest.NewRequest("GET", "/api", nil)
	w := ratelimittest.NewDiscardWriter()
	served := 0
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
	for name, obs := range map[string]fair.Observer{"no observer": nil, "observer": fair.ObserverFunc(func(fair.Event) {})} {
		cfg := fair.Preset(4, ratelimit.ByIP())
		cfg.Observer = obs
		s := fair.New(cfg)
		h := s.Handler(next)
		if allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); allocs != 0 {
			t.Errorf("%s: %v allocations per uncontended request through Handler, want 0", name, allocs)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			done, ok := s.Admit(w, r)
			if !ok {
				t.Fatal("refused")
			}
			done()
		})
		if allocs > 2 {
			t.Errorf("%s: %v allocations per uncontended Admit and done, want at most 2", name, allocs)
		}
		if st := s.Stats(); st.InUse != 0 {
			t.Errorf("%s: %+v after the requests, want no seat in use", name, st)
		}
	}
	if served != 2*1001 {
		t.Errorf("next served %d requests, want %d", served, 2*1001)
	}
}
