package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// BenchmarkSlidingLogTake is a sliding-log check on Redis beside the same
// check under GCRA, on the allow path (a log of 10,000 events per 10ms that
// never fills: every check trims and adds) and on the deny path of a full
// hot key (without the denied cache: every check counts the window).
func BenchmarkSlidingLogTake(b *testing.B) {
	cases := []struct {
		name  string
		limit ratelimit.Limit
		first int // the cost taken before the run
	}{
		{"allow", ratelimit.Limit{Rate: 10_000, Period: 10 * time.Millisecond}, 0},
		{"deny", ratelimit.PerHour(100), 100},
	}
	for _, c := range cases {
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingLog} {
			for _, v := range storeVariants[:2] { // plain and coalesced, without the denied cache
				b.Run(c.name+"/"+alg.String()+"/"+v.name, func(b *testing.B) {
					client, counter := benchClient(b)
					s := newStore(client, append([]Option{WithPrefix(uniquePrefix(b))}, v.opts...)...)
					req := stores.Request{Rule: "bench", Key: "hot", Limit: c.limit, Algorithm: alg, Cost: c.first}
					if _, err := s.Take(context.Background(), req); err != nil {
						b.Fatal(err)
					}
					req.Cost = 1
					runParallel(b, counter, func(ctx context.Context, key string) error {
						_, err := s.Take(ctx, req)
						return err
					}, []string{"hot"})
				})
			}
		}
	}
}
