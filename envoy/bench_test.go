package envoy

import (
	"context"
	"strconv"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// BenchmarkShouldRateLimit measures the service's own work per call, on
// the memory store and without gRPC: lookup, the store's decision, the
// statuses and the response fields.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, tc := range []struct{ name, domain string }{{"allow", "allow"}, {"deny", "deny"}} {
		b.Run(tc.name, func(b *testing.B) {
			rules := compileYAML(b, "bench.yaml", benchAllowYAML)
			deny := compileYAML(b, "deny.yaml", benchDenyYAML)
			if tc.domain == "deny" {
				rules = deny
			}
			svc, err := New(rules, memory.New())
			if err != nil {
				b.Fatal(err)
			}
			reqs := make([]*pb.RateLimitRequest, 1024)
			for i := range reqs {
				reqs[i] = request(tc.domain, [][]string{{"user", strconv.Itoa(i)}}, 1)
				if tc.domain == "deny" {
					_, _ = svc.ShouldRateLimit(context.Background(), reqs[i])
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := svc.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
