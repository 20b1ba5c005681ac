package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// remoteLike hides the memory store's type, as a Redis store would: the
// limiter takes its general path, not the in-process fast path.
type remoteLike struct{ ratelimit.Store }

// BenchmarkRequestPath measures the general request path (a store the fast
// path does not know; several rules) and the programmatic Allow, for 1,000
// client IPs in parallel.
func BenchmarkRequestPath(b *testing.B) {
	always := ratelimit.Limit{Rate: 1e9, Period: time.Second}
	for _, bm := range []struct {
		name  string
		rules func(limit ratelimit.Limit) []ratelimit.Rule
	}{
		{"one-rule", func(limit ratelimit.Limit) []ratelimit.Rule {
			return []ratelimit.Rule{{Name: "ip", Limit: limit, Key: ratelimit.ByIP()}}
		}},
		{"three-rules", func(limit ratelimit.Limit) []ratelimit.Rule {
			return []ratelimit.Rule{
				{Name: "global", Limit: always, Key: ratelimit.Global()},
				{Name: "ip", Limit: limit, Key: ratelimit.ByIP()},
				{Name: "route", Limit: always, Key: ratelimit.Keys(ratelimit.ByIP(), ratelimit.ByRoute())},
			}
		}},
	} {
		for _, path := range []string{"allow", "deny"} {
			b.Run(bm.name+"/"+path, func(b *testing.B) {
				limit := always
				if path == "deny" {
					limit = ratelimit.PerHour(1)
				}
				store := remoteLike{memory.New()}
				l := ratelimit.NewRulesLimiter(bm.rules(limit), ratelimit.WithStore(store))
				benchHandler(b, l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })), path)
			})
		}
	}
	b.Run("Allow", func(b *testing.B) {
		l := ratelimit.NewLimiter(always, ratelimit.ByIP(), ratelimit.WithStore(remoteLike{memory.New()}))
		var seq atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(7919))
			ctx := context.Background()
			for pb.Next() {
				i++
				if res, err := l.Allow(ctx, benchKeys[i%len(benchKeys)]); err != nil || !res.Allowed {
					b.Errorf("Allow: %+v %v", res, err)
					return
				}
			}
		})
	})
}

var benchKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.%d.%d", i>>8&255, i&255)
	}
	return keys
}()

func benchHandler(b *testing.B, h http.Handler, path string) {
	reqs := make([]*http.Request, len(benchKeys))
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = benchKeys[i] + ":1234"
		reqs[i].Pattern = "/api/items"
		h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i]) // drains the deny path's keys
	}
	want := 200
	if path == "deny" {
		want = 429
	}
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := ratelimittest.NewDiscardWriter()
		i := int(seq.Add(7919))
		for pb.Next() {
			w.Reset()
			i++
			h.ServeHTTP(w, reqs[i%len(reqs)])
			if w.Status() != want {
				b.Errorf("status %d, want %d", w.Status(), want)
				return
			}
		}
	})
}
