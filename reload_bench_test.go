package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkReloadable compares the bare Limiter's middleware with the same
// Limiter behind a Reloadable, in one run: the difference is the cost of
// the handle (one atomic load).
func BenchmarkReloadable(b *testing.B) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	l := ratelimit.NewLimiter(ratelimit.Limit{Rate: 1e9, Period: time.Second}, ratelimit.ByIP())
	// skipped decides without a store: the cheapest path, where the
	// handle's share of the time is largest.
	skipped := ratelimit.NewLimiter(ratelimit.PerSecond(1), ratelimit.ByIP(), ratelimit.WithSkip(func(*http.Request) bool { return true }))
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", l.Handler(next)},
		{"reloadable", ratelimit.NewReloadable(l).Handler(next)},
		{"skipped/bare", skipped.Handler(next)},
		{"skipped/reloadable", ratelimit.NewReloadable(skipped).Handler(next)},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/items", nil)
			req.RemoteAddr = "10.0.0.1:1234"
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := ratelimittest.NewDiscardWriter()
				for pb.Next() {
					w.Reset()
					c.h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// BenchmarkReloadableLoad isolates what the handle adds to a request: the
// load of the current Limiter, side by side with reading a plain field.
func BenchmarkReloadableLoad(b *testing.B) {
	l := ratelimit.NewLimiter(ratelimit.PerSecond(1), ratelimit.ByIP())
	h := ratelimit.NewReloadable(l)
	plain := struct{ l *ratelimit.Limiter }{l}
	var sink *ratelimit.Limiter
	b.Run("field", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var got *ratelimit.Limiter
			for pb.Next() {
				got = plain.l
			}
			sink = got
		})
	})
	b.Run("reloadable", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var got *ratelimit.Limiter
			for pb.Next() {
				got = h.Load()
			}
			sink = got
		})
	})
	if sink == nil {
		b.Fatal("nothing loaded")
	}
}

// BenchmarkReloadableOverhead measures what the handle adds to a request:
// the same Limiter is served directly and through a Reloadable in
// alternating short rounds on one goroutine (the order flips each round,
// so that both sides share the machine's swings), and the medians over the
// rounds are reported: bare-ns/op, handle-ns/op and their difference,
// added-ns/op (the median of the per-round differences). Run with
// -benchtime 2000000x or more.
func BenchmarkReloadableOverhead(b *testing.B) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, c := range []struct {
		name string
		l    *ratelimit.Limiter
	}{
		{"skipped", ratelimit.NewLimiter(ratelimit.PerSecond(1), ratelimit.ByIP(), ratelimit.WithSkip(func(*http.Request) bool { return true }))},
		{"limited", ratelimit.NewLimiter(ratelimit.Limit{Rate: 1e9, Period: time.Second}, ratelimit.ByIP())},
	} {
		b.Run(c.name, func(b *testing.B) {
			bare, handle := c.l.Handler(next), ratelimit.NewReloadable(c.l).Handler(next)
			req := httptest.NewRequest("GET", "/api/items", nil)
			req.RemoteAddr = "10.0.0.1:1234"
			w := ratelimittest.NewDiscardWriter()
			const per = 5000
			rounds := max(b.N/(2*per), 5)
			run := func(h http.Handler) float64 {
				start := time.Now()
				for range per {
					w.Reset()
					h.ServeHTTP(w, req)
				}
				return float64(time.Since(start).Nanoseconds()) / float64(per)
			}
			var bares, handles, diffs []float64
			b.ReportAllocs()
			b.ResetTimer()
			for r := range rounds {
				var tb, th float64
				if r%2 == 0 {
					tb, th = run(bare), run(handle)
				} else {
					th, tb = run(handle), run(bare)
				}
				bares, handles, diffs = append(bares, tb), append(handles, th), append(diffs, th-tb)
			}
			b.ReportMetric(median(bares), "bare-ns/op")
			b.ReportMetric(median(handles), "handle-ns/op")
			b.ReportMetric(median(diffs), "added-ns/op")
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
