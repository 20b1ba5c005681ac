package ratelimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// BenchmarkEntryPoints measures Check (with Done), Admit (with done) and
// Allow under the shapes that have direct paths of their own (stacked
// rules, a Concurrency rule, a settled rule), over 1,000 clients in parallel: on the in-process
// store (direct) and on the same store behind a wrapper the direct path
// does not recognise (general), side by side in one run.
func BenchmarkEntryPoints(b *testing.B) {
	always := ratelimit.Limit{Rate: 1e9, Period: time.Second}
	shapes := []struct {
		name  string
		rules []ratelimit.Rule
	}{
		{"stacked", []ratelimit.Rule{{Name: "rate", Limit: always, Key: ratelimit.ByIP()},
			{Name: "daily", Quota: ratelimit.Daily(1_000_000_000, time.UTC), Key: ratelimit.ByIP()}}},
		{"concurrency", []ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1000, Period: time.Minute}, Key: ratelimit.ByIP()}}},
		{"settled", []ratelimit.Rule{{Name: "settled", Limit: always, Key: ratelimit.ByIP(), Settled: true}}},
	}
	reqs := make([]*http.Request, len(benchKeys))
	for i := range reqs {
		reqs[i] = clientReq(i)
	}
	for _, entry := range []string{"Check", "Admit", "Allow"} {
		for _, sh := range shapes {
			if entry == "Allow" && sh.name == "concurrency" {
				continue // Allow takes a slot it never gives back
			}
			for _, path := range []string{"direct", "general"} {
				b.Run(entry+"/"+sh.name+"/"+path, func(b *testing.B) {
					var opts []ratelimit.Option
					if path == "general" {
						opts = append(opts, generalPath(stores.SystemClock()))
					}
					l := ratelimit.NewRulesLimiter(sh.rules, opts...)
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						i := 0
						ctx := b.Context()
						w := ratelimittest.NewDiscardWriter()
						for pb.Next() {
							i++
							if entry == "Admit" {
								w.Reset()
								done, ok := l.Admit(w, reqs[i%len(reqs)])
								if !ok {
									b.Error("denied")
									return
								}
								done()
								continue
							}
							if entry == "Allow" {
								if res, _ := l.Allow(ctx, benchKeys[i%len(benchKeys)]); !res.Allowed {
									b.Error("denied")
									return
								}
								continue
							}
							v := l.Check(reqs[i%len(reqs)])
							if !v.Allowed() {
								b.Error("denied")
								return
							}
							v.Done()
						}
					})
				})
			}
		}
	}
}
