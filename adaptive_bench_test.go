package ratelimit_test

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// BenchmarkAdaptiveAcquireRelease compares one acquire+release of an
// AdaptiveLimiter (sampling the latency, closing windows) with a
// buffered-channel semaphore, side by side, in parallel. Neither limit
// binds: this is the cost of admitting a request. "adaptive" reads the
// clock twice (Acquire, Release); "adaptive-given-time" is given the times
// (AcquireAt, ReleaseAt), as a caller that already reads the clock for its
// own purposes; "clock-only" is the two clock reads alone, whose cost
// depends on the machine's clock source.
func BenchmarkAdaptiveAcquireRelease(b *testing.B) {
	const limit = 1 << 20
	b.Run("adaptive-given-time", func(b *testing.B) {
		l := ratelimit.NewAdaptiveLimiter(ratelimit.Adaptive{Min: limit, Max: limit, Initial: limit})
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
				t.ReleaseAt(now.Add(500*time.Nanosecond), ratelimit.VerdictSuccess)
			}
		})
	})
	b.Run("clock-only", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var sink time.Duration
			for pb.Next() {
				t := time.Now()
				sink += time.Since(t)
			}
			_ = sink
		})
	})
	b.Run("adaptive", func(b *testing.B) {
		l := ratelimit.NewAdaptiveLimiter(ratelimit.Adaptive{Min: limit, Max: limit, Initial: limit})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t, ok := l.Acquire(true)
				if !ok {
					b.Fatal("rejected")
				}
				t.Release(ratelimit.VerdictSuccess)
			}
		})
	})
	b.Run("chan-semaphore", func(b *testing.B) {
		sem := make(chan struct{}, limit)
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
	})
}
