package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
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

// semaphore is the hand-written middleware an adaptive rule is measured
// against: a buffered channel of n slots. A request takes a slot without
// waiting, runs next and gives the slot back (also when next panics). When
// every slot is taken it writes the response an adaptive rule named
// "inflight" writes at the limit n: 503 with the same five header fields
// (values built once and shared, as the rule's are) and problem body. It
// neither times the request nor looks at its status: a fixed cap has
// nothing to learn.
func semaphore(n int, next http.Handler) http.Handler {
	sem := make(chan struct{}, n)
	policy := []string{`"inflight";q=` + strconv.Itoa(n) + `;qu="concurrent-requests"`}
	remaining, retryAfter := []string{`"inflight";r=0`}, []string{"1"}
	noStore, problem := []string{"no-store"}, []string{"application/problem+json"}
	body := []byte(`{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Service Unavailable","status":503,` +
		`"detail":"The server is at its concurrency limit; retry shortly.","violated-policies":["inflight"]}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		default:
			h := w.Header()
			h["Ratelimit-Policy"], h["Ratelimit"], h["Retry-After"] = policy, remaining, retryAfter
			h["Cache-Control"], h["Content-Type"] = noStore, problem
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(body)
			return
		}
		defer func() { <-sem }()
		next.ServeHTTP(w, r)
	})
}

// BenchmarkAdaptiveMiddleware is a request through an adaptive rule's
// middleware (NewRules with one Global adaptive rule, the library's entry
// point) beside the same request through semaphore, the channel
// semaphore's middleware, in the same run: both wrap the same handler,
// which answers 200, and are served the same request with the same
// writer. Where neither binds ("allow"), the adaptive rule also
// classifies the response's status and samples latency; where both are
// full ("reject"), both write the same 503 response. A fixed
// Concurrency rule on the default store is the third column. "with-rate"
// is a rate rule (on its direct path) alone, and with an adaptive rule in
// front of it: the cost of the adaptive step on that path.
//
// The writer is ratelimittest's DiscardWriter, which reports its status
// (as chi's, gin's and echo's writers do), or "plain", one that does not
// (as net/http's does not): the adaptive rule then records the status
// itself.
func BenchmarkAdaptiveMiddleware(b *testing.B) {
	const big = 1 << 20
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	rate := ratelimit.Rule{Name: "rate", Key: ratelimit.Global(), Limit: ratelimit.PerMinute(1 << 30)}
	rule := func(limit int) []ratelimit.Rule {
		return []ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: limit, Max: limit, Initial: limit}}}
	}
	for _, tc := range []struct {
		name  string
		h     func() http.Handler
		plain bool
		want  int
	}{
		{"allow/adaptive", func() http.Handler { return ratelimit.NewRules(rule(big))(next) }, false, 200},
		{"allow/semaphore", func() http.Handler { return semaphore(big, next) }, false, 200},
		{"allow/concurrency", func() http.Handler {
			return ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: big, Period: time.Minute}}})(next)
		}, false, 200},
		{"allow-plain/adaptive", func() http.Handler { return ratelimit.NewRules(rule(big))(next) }, true, 200},
		{"allow-plain/semaphore", func() http.Handler { return semaphore(big, next) }, true, 200},
		{"with-rate/rate", func() http.Handler { return ratelimit.NewRules([]ratelimit.Rule{rate})(next) }, false, 200},
		{"with-rate/rate+adaptive", func() http.Handler { return ratelimit.NewRules(append(rule(big), rate))(next) }, false, 200},
		{"reject/adaptive", func() http.Handler { return heldFull(b, ratelimit.NewRules(rule(1))) }, false, 503},
		{"reject/semaphore", func() http.Handler {
			return heldFull(b, func(h http.Handler) http.Handler { return semaphore(1, h) })
		}, false, 503},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h()
			req := httptest.NewRequest("GET", "/api/items", nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				if tc.plain {
					w := &plainWriter{h: http.Header{}}
					for pb.Next() {
						w.code = 0
						h.ServeHTTP(w, req)
						if w.code != tc.want {
							b.Errorf("status %d", w.code)
							return
						}
					}
					return
				}
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
}

// heldFull returns mw around a handler that answers 200, with one request
// held inside it until the benchmark ends: a middleware of one slot is
// then full.
func heldFull(b *testing.B, mw func(http.Handler) http.Handler) http.Handler {
	g := newGate(200)
	h := mw(g)
	done := make(chan struct{})
	go func() {
		ratelimittest.Do(h, httptest.NewRequest("GET", "/", nil))
		close(done)
	}()
	<-g.arrived
	b.Cleanup(func() {
		close(g.release)
		<-done
	})
	return h
}
