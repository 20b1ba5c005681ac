package config_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// bigFile is a file of rules rules sharing overrides overrides.
func bigFile(rules, overrides int) []byte {
	var b strings.Builder
	b.WriteString("version: 1\nrules:\n")
	per := max(1, overrides/rules)
	o := 0
	for i := range rules {
		fmt.Fprintf(&b, "  - name: rule-%d\n    key: tenant\n    limit: %d/min burst %d\n    match: {methods: [GET, POST], routes: [\"/api/v%d/*\"]}\n", i, 100+i, 120+i, i)
		if o < overrides {
			b.WriteString("    overrides:\n")
			for j := 0; j < per && o < overrides; j++ {
				lim := "1000/min"
				if o%10 == 0 {
					lim = "0"
				}
				fmt.Fprintf(&b, "      tenant-%d: %s\n", o, lim)
				o++
			}
		}
	}
	return []byte(b.String())
}

// BenchmarkDispatch serves a POST to /api/v5/items, which matches 3 rules
// of a 1,000-rule file (per-ip, writes, v5), through the file's Set, side
// by side with a Limiter of those 3 rules alone: the difference is the
// cost of sending the request to its group. "index" is the lookup alone.
func BenchmarkDispatch(b *testing.B) {
	reg := testRegistry(b, stores.SystemClock())
	const lim = "1000000/s" // nothing is denied
	build := func(n int) *config.Set {
		cfg, err := config.Parse("big.yaml", []byte(versionRules(n, lim, lim, lim)), reg)
		if err != nil {
			b.Fatal(err)
		}
		return cfg.Build()
	}
	big, small := build(1000), build(6) // small: rules per-ip, writes, v0..v5
	req := ratelimittest.NewRequest("POST", "/api/v5/items", "10.0.0.1:1", "X-Tenant", "acme")
	direct := small.Limiter(req)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"limiter-of-3", direct.Handler(okHandler)},
		{"set-of-1000", big.Handler(okHandler)},
		{"live-of-1000", config.NewLive(big).Handler(okHandler)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			w := ratelimittest.NewDiscardWriter()
			for b.Loop() {
				w.Reset()
				c.h.ServeHTTP(w, req)
				if w.Status() != 200 {
					b.Fatal(w.Status())
				}
			}
		})
	}
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if big.Limiter(req) == nil {
				b.Fatal("no group")
			}
		}
	})
}

// BenchmarkLiveOverhead measures what config.Live adds to a request of a
// 1,000-rule Set: the Set's handler and the Live's are served in
// alternating short rounds on one goroutine, and the medians over the
// rounds are reported (see the root package's
// BenchmarkReloadableOverhead). The request (GET /other) matches no rule,
// so the request path is the index and the handle alone, where the
// handle's share is largest. Run with -benchtime 2000000x or more.
func BenchmarkLiveOverhead(b *testing.B) {
	var src strings.Builder
	src.WriteString("rules:\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "  - {name: v%d, key: tenant, limit: 5/s, match: {routes: [\"/api/v%d/*\"]}}\n", i, i)
	}
	cfg, err := config.Parse("big.yaml", []byte(src.String()), testRegistry(b, nil))
	if err != nil {
		b.Fatal(err)
	}
	set := cfg.Build()
	bare, live := set.Handler(okHandler), config.NewLive(set).Handler(okHandler)
	req := ratelimittest.NewRequest("GET", "/other", "10.0.0.1:1")
	w := ratelimittest.NewDiscardWriter()
	const per = 5000
	run := func(h http.Handler) float64 {
		start := time.Now()
		for range per {
			w.Reset()
			h.ServeHTTP(w, req)
		}
		return float64(time.Since(start).Nanoseconds()) / per
	}
	var bares, lives, diffs []float64
	b.ReportAllocs()
	b.ResetTimer()
	for r := range max(b.N/(2*per), 5) {
		var tb, tl float64
		if r%2 == 0 {
			tb, tl = run(bare), run(live)
		} else {
			tl, tb = run(live), run(bare)
		}
		bares, lives, diffs = append(bares, tb), append(lives, tl), append(diffs, tl-tb)
	}
	b.ReportMetric(median(bares), "set-ns/op")
	b.ReportMetric(median(lives), "live-ns/op")
	b.ReportMetric(median(diffs), "added-ns/op")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
