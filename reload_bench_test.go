package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
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
