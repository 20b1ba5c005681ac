package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

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

// BenchmarkRequestPathCPU runs the same paths on one goroutine locked to
// its thread and reports the thread's CPU time per request (cpu-ns/op)
// beside the wall time: on a machine shared with other work, time spent
// descheduled inflates ns/op but not cpu-ns/op.
func BenchmarkRequestPathCPU(b *testing.B) {
	always := ratelimit.Limit{Rate: 1e9, Period: time.Second}
	for _, path := range []string{"allow", "deny"} {
		limit := always
		if path == "deny" {
			limit = ratelimit.PerHour(1)
		}
		handlers := map[string]func() *ratelimit.Limiter{
			"fast-path": func() *ratelimit.Limiter { return ratelimit.NewLimiter(limit, ratelimit.ByIP()) },
			"one-rule": func() *ratelimit.Limiter {
				return ratelimit.NewLimiter(limit, ratelimit.ByIP(), ratelimit.WithStore(remoteLike{memory.New()}))
			},
			"three-rules": func() *ratelimit.Limiter {
				return ratelimit.NewRulesLimiter([]ratelimit.Rule{
					{Name: "global", Limit: always, Key: ratelimit.Global()},
					{Name: "ip", Limit: limit, Key: ratelimit.ByIP()},
					{Name: "route", Limit: always, Key: ratelimit.Keys(ratelimit.ByIP(), ratelimit.ByRoute())},
				}, ratelimit.WithStore(remoteLike{memory.New()}))
			},
		}
		for _, name := range []string{"fast-path", "one-rule", "three-rules"} {
			b.Run(name+"/"+path, func(b *testing.B) {
				h := handlers[name]().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
				benchCPU(b, h, path)
			})
		}
	}
}

func benchCPU(b *testing.B, h http.Handler, path string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	reqs := make([]*http.Request, len(benchKeys))
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = benchKeys[i] + ":1234"
		reqs[i].Pattern = "/api/items"
		h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i])
	}
	want := 200
	if path == "deny" {
		want = 429
	}
	w := ratelimittest.NewDiscardWriter()
	b.ReportAllocs()
	b.ResetTimer()
	start := threadCPU()
	for i := 0; i < b.N; i++ {
		w.Reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.Status() != want {
			b.Fatalf("status %d, want %d", w.Status(), want)
		}
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
}

// threadCPU is the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
