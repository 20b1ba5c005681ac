//go:build unix

package config_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/config"
)

// cpuTime is the CPU time the process has used: unlike elapsed time, it
// does not grow while other processes have the machine.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCompileTimeGrowsLinearly compiles a file ten times the size of
// another (1,000 rules and 10,000 overrides against 100 and 1,000): the
// CPU time must grow about tenfold (a larger heap costs the collector a
// little more), not a hundredfold as a quadratic step would make it. It
// compares the cheapest of alternating runs, and the bound is loose (50x):
// it catches a complexity regression, it does not time the target.
func TestCompileTimeGrowsLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 14 large files")
	}
	reg := testRegistry(t, nil)
	small, big := bigFile(100, 1_000), bigFile(1_000, 10_000)
	compile := func(data []byte) time.Duration {
		start := cpuTime(t)
		cfg, err := config.Parse("big.yaml", data, reg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Build()
		return cpuTime(t) - start
	}
	cheapSmall, cheapBig := time.Hour, time.Hour
	for range 7 {
		cheapSmall = min(cheapSmall, compile(small))
		cheapBig = min(cheapBig, compile(big))
	}
	ratio := float64(cheapBig) / float64(max(cheapSmall, time.Millisecond))
	t.Logf("CPU time: 100 rules %v, 1,000 rules %v (%.1fx)", cheapSmall, cheapBig, ratio)
	if ratio > 50 {
		t.Fatalf("10x the rules took %.0fx the CPU time (%v vs %v)", ratio, cheapBig, cheapSmall)
	}
}

// BenchmarkCompile compiles a file of 16 rules with 10,000 overrides, and
// a file of 1,000 rules with 10,000 overrides, and builds its Set: what a
// reload costs. Besides elapsed time it reports the process's CPU time per
// compile, cpu-ms/op, which a busy machine inflates less.
func BenchmarkCompile(b *testing.B) {
	reg := testRegistry(b, nil)
	for _, c := range []struct{ rules, overrides int }{{16, 10_000}, {1_000, 10_000}} {
		data := bigFile(c.rules, c.overrides)
		b.Run(fmt.Sprintf("rules=%d/overrides=%d", c.rules, c.overrides), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			start := cpuTime(b)
			for b.Loop() {
				cfg, err := config.Parse("big.yaml", data, reg)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Build()
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// TestGlobRouteMatchingGrowsLinearly: routers that compile route patterns
// into backtracking regular expressions took exponential time on crafted
// paths (path-to-regexp, CVE-2024-45296). A route here is a path.Match
// glob, matched segment by segment and each star without backtracking
// into earlier ones, so a path ten times longer costs about ten times the
// CPU time against the worst glob this test can write, not a hundred
// times or more. Like TestCompileTimeGrowsLinearly it compares the
// cheapest of alternating runs, with a loose bound (50x).
func TestGlobRouteMatchingGrowsLinearly(t *testing.T) {
	const rules = `
rules:
  - name: files
    key: tenant
    limit: 1000000/s
    match: {routes: ["/files/*a*a*a*a*a*a*a*b", "/files/[a-z]*a?a*a*a*a*a*c"]}
`
	cfg, err := config.Parse("glob.yaml", []byte(rules), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Build().Handler(okHandler)
	serve := func(n int) time.Duration {
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = "/files/" + strings.Repeat("a", n) // no b, no c: every star tries every position
		req.Header.Set("X-Tenant", "t")
		w := httptest.NewRecorder()
		start := cpuTime(t)
		for range 50 {
			h.ServeHTTP(w, req)
		}
		return cpuTime(t) - start
	}
	cheapSmall, cheapBig := time.Hour, time.Hour
	for range 7 {
		cheapSmall = min(cheapSmall, serve(4_000))
		cheapBig = min(cheapBig, serve(40_000))
	}
	ratio := float64(cheapBig) / float64(max(cheapSmall, time.Millisecond))
	t.Logf("CPU time of 50 requests: 4,000-byte segment %v, 40,000-byte segment %v (%.1fx)", cheapSmall, cheapBig, ratio)
	if ratio > 50 {
		t.Fatalf("a 10x longer path took %.0fx the CPU time (%v vs %v)", ratio, cheapBig, cheapSmall)
	}
}
