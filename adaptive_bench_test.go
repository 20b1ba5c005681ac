package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkAdaptiveAcquireRelease compares one acquire+release of an
// adaptive.Limiter with a buffered-channel semaphore, side by side, in
// parallel. Neither limit binds: this is the cost of admitting a request.
// "adaptive" is Acquire and Release, which read the clock only for the
// requests they sample (all of them below about 5,000 a Window, one in up
// to 64 above); "adaptive-given-time" is given the times (AcquireAt,
// ReleaseAt), as a caller that reads the clock for its own purposes;
// "adaptive-all-timed" times every request, as at low rates;
// "clock-only" is two monotonic clock readings alone, the cost of timing
// a request on this machine's clock source.
//
// go test -count=1 interleaves the variants; compare them within one run,
// and take the median of several (scripts in docs/adaptive.md).
func BenchmarkAdaptiveAcquireRelease(b *testing.B) {
	const limit = 1 << 20
	b.Run("adaptive", func(b *testing.B) {
		l := adaptive.New(adaptive.Config{Min: limit, Max: limit, Initial: limit})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t, ok := l.Acquire(true)
				if !ok {
					b.Fatal("rejected")
				}
				t.Release(adaptive.SampleSuccess)
			}
		})
	})
	b.Run("chan-semaphore", benchChanSemaphore)
	b.Run("adaptive-given-time", func(b *testing.B) {
		l := adaptive.New(adaptive.Config{Min: limit, Max: limit, Initial: limit})
		start := time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			now := start
			for pb.Next() {
				now = now.Add(time.Microsecond)
				t, ok := l.AcquireAt(now, true)
				if !ok {
					b.Fatal("rejected")
				}
				t.ReleaseAt(now.Add(500*time.Nanosecond), adaptive.SampleSuccess)
			}
		})
	})
	b.Run("adaptive-all-timed", func(b *testing.B) {
		// MinSamples so high that sampling never thins out: every request
		// reads the clock twice, as below about 5,000 requests a Window.
		l := adaptive.New(adaptive.Config{Min: limit, Max: limit, Initial: limit, MinSamples: 1 << 24})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t, ok := l.Acquire(true)
				if !ok {
					b.Fatal("rejected")
				}
				t.Release(adaptive.SampleSuccess)
			}
		})
	})
	b.Run("clock-only", func(b *testing.B) {
		epoch := time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var sink time.Duration
			for pb.Next() {
				t := time.Since(epoch)
				sink += time.Since(epoch) - t
			}
			_ = sink
		})
	})
}

func benchChanSemaphore(b *testing.B) {
	sem := make(chan struct{}, 1<<20)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			select {
			case sem <- struct{}{}:
			default:
				b.Fatal("rejected")
			}
			<-sem
		}
	})
}

// plainWriter is a ResponseWriter without a Status method, like net/http's.
type plainWriter struct {
	h    http.Header
	code int
}

func (w *plainWriter) Header() http.Header         { return w.h }
func (w *plainWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *plainWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkAdaptiveMiddleware is a request through the middleware with one
// adaptive rule (admitted, or rejected with a 503), beside the same
// through a fixed Concurrency rule on the default memory store.
func BenchmarkAdaptiveMiddleware(b *testing.B) {
	const big = 1 << 20
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct {
		name string
		rule ratelimit.Rule
		want int
	}{
		{"adaptive/allow", ratelimit.Rule{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: big, Max: big, Initial: big}}, 200},
		{"concurrency/allow", ratelimit.Rule{Name: "inflight", Key: ratelimit.Global(), Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: big, Period: time.Minute}}, 200},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := ratelimit.NewRules([]ratelimit.Rule{tc.rule})(next)
			req := httptest.NewRequest("GET", "/api/items", nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := ratelimittest.NewDiscardWriter()
				for pb.Next() {
					w.Reset()
					h.ServeHTTP(w, req)
					if w.Status() != tc.want {
						b.Errorf("status %d", w.Status())
						return
					}
				}
			})
		})
	}
	b.Run("adaptive/allow-plain-writer", func(b *testing.B) {
		h := ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: big, Max: big, Initial: big}}})(next)
		req := httptest.NewRequest("GET", "/api/items", nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &plainWriter{h: http.Header{}}
			for pb.Next() {
				w.code = 0
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Errorf("status %d", w.code)
					return
				}
			}
		})
	})
	b.Run("adaptive/reject", func(b *testing.B) {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 1, Max: 1, Initial: 1}}})
		held, _ := l.Admit(ratelimittest.NewDiscardWriter(), httptest.NewRequest("GET", "/", nil))
		defer held()
		h := l.Handler(next)
		req := httptest.NewRequest("GET", "/api/items", nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := ratelimittest.NewDiscardWriter()
			for pb.Next() {
				w.Reset()
				h.ServeHTTP(w, req)
				if w.Status() != 503 {
					b.Errorf("status %d", w.Status())
					return
				}
			}
		})
	})
}
