package ratelimit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// BenchmarkAllow measures Allow on one rule over 10,000 keys: on the
// in-process store (the direct path) and on the same store behind a
// wrapper the direct path does not recognise (the general path), side by
// side in one run.
func BenchmarkAllow(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for name, opts := range map[string][]ratelimit.Option{
		"direct":  nil,
		"general": {generalPath(stores.SystemClock())},
	} {
		b.Run(name, func(b *testing.B) {
			l := ratelimit.NewLimiter(ratelimit.Limit{Rate: 1e9, Period: time.Second}, ratelimit.ByIP(), opts...)
			ctx := b.Context()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if res, _ := l.Allow(ctx, keys[i%len(keys)]); !res.Allowed {
						b.Fatal("denied")
					}
					i++
				}
			})
		})
	}
}
