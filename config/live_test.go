package config_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

type seenKey struct{}

// genRegistry is a Registry whose key records generation gen in the
// request's set of generations, over the shared store.
func genRegistry(gen int, store ratelimit.Store) *config.Registry {
	return &config.Registry{
		Keys: map[string]ratelimit.KeyFunc{"client": func(r *http.Request) (string, error) {
			seen := r.Context().Value(seenKey{}).(*sync.Map)
			seen.Store(gen, true)
			return "client", nil
		}},
		Stores: map[string]ratelimit.Store{"shared": store},
	}
}

func TestLiveUnderLoadDecidesEachRequestWithOneSet(t *testing.T) {
	const clients, reloads, inflight = 64, 1000, 1000
	store := memory.New()
	build := func(gen int) *config.Set {
		src := "store: shared\nrules:\n" +
			"  - {name: rate, key: client, limit: 1000000/s}\n" +
			"  - {name: window, key: client, limit: 1000000/s, algorithm: sliding-window, match: {routes: [/api/*]}}\n"
		if gen%2 == 0 { // odd generations drop the concurrency rule while slots are held
			src += fmt.Sprintf("  - {name: inflight, key: client, concurrency: {max: %d, slot_ttl: 1h}}\n", inflight)
		}
		cfg, err := config.Parse("gen.yaml", []byte(src), genRegistry(gen, store))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Build()
	}
	before := runtime.NumGoroutine()
	live := config.NewLive(build(0))
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runtime.Gosched() // hold the slot across a possible reload
		w.WriteHeader(200)
	})
	h := live.Handler(next)
	var stop atomic.Bool
	var errs, mixed, total atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := ratelimittest.NewDiscardWriter()
			paths := []string{"/api/x", "/other"}
			for !stop.Load() {
				seen := &sync.Map{}
				req := ratelimittest.NewRequest("GET", paths[i%2], "10.0.0.1:1")
				req = req.WithContext(context.WithValue(req.Context(), seenKey{}, seen))
				w.Reset()
				h.ServeHTTP(w, req)
				total.Add(1)
				if w.Status() != 200 {
					errs.Add(1)
				}
				n := 0
				seen.Range(func(any, any) bool { n++; return true })
				if n != 1 {
					mixed.Add(1)
				}
			}
		}()
	}
	for gen := 1; gen <= reloads; gen++ {
		live.Store(build(gen))
	}
	stop.Store(true)
	wg.Wait()
	if errs.Load() != 0 || mixed.Load() != 0 || total.Load() == 0 {
		t.Fatalf("%d requests: %d not 200, %d decided by more than one rule set", total.Load(), errs.Load(), mixed.Load())
	}
	res, err := store.Take(context.Background(), stores.Request{
		Rule: "inflight", Key: "client", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: inflight, Period: time.Hour},
	})
	if err != nil || res.Remaining != inflight {
		t.Fatalf("after the load: %d of %d slots free (err %v): slots leaked across reloads", res.Remaining, inflight, err)
	}
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after, %d before", n, before)
	}
}

// TestReloadingAnUnchangedFileAdmitsExactlyLikeAStaticSet compiles the
// same file 1,000 times into a Live while a static Set of it, on a store
// of its own, sees the same requests at the same times.
func TestReloadingAnUnchangedFileAdmitsExactlyLikeAStaticSet(t *testing.T) {
	for _, alg := range []string{"gcra", "sliding-window", "fixed-window", "sliding-log"} {
		t.Run(alg, func(t *testing.T) {
			src := fmt.Sprintf("rules:\n  - {name: ip, key: client_ip, limit: 10/s, algorithm: %s}\n"+
				"  - {name: api, key: client_ip, limit: 4/s, algorithm: %s, match: {routes: [/api/*]}}\n", alg, alg)
			clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			compile := func(reg *config.Registry) *config.Set {
				cfg, err := config.Parse("r.yaml", []byte(src), reg)
				if err != nil {
					t.Fatal(err)
				}
				return cfg.Build()
			}
			static := compile(testRegistry(t, clock)).Handler(okHandler)
			reg := testRegistry(t, clock)
			live := config.NewLive(compile(reg))
			reloaded := live.Handler(okHandler)
			rng := rand.New(rand.NewPCG(1, uint64(len(alg))))
			admitted := 0
			for i := range 1000 {
				live.Store(compile(reg))
				for range rng.IntN(6) {
					path := []string{"/api/x", "/"}[rng.IntN(2)]
					a := ratelimittest.Do(static, ratelimittest.NewRequest("GET", path, "10.0.0.1:1")).Code
					b := ratelimittest.Do(reloaded, ratelimittest.NewRequest("GET", path, "10.0.0.1:1")).Code
					if a != b {
						t.Fatalf("reload %d, %s: static %d, reloaded %d", i, path, a, b)
					}
					if a == 200 {
						admitted++
					}
				}
				clock.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
			}
			if admitted == 0 {
				t.Fatal("nothing admitted")
			}
		})
	}
}

// TestLiveAddsNoAllocation serves a Set directly and through a Live.
func TestLiveAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled objects at random")
	}
	cfg, err := config.Parse("big.yaml", []byte(versionRules(50, "1000000/s", "1000000/s", "1000000/s")), testRegistry(t, stores.SystemClock()))
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.Build()
	req := ratelimittest.NewRequest("POST", "/api/v5/items", "10.0.0.1:1", "X-Tenant", "acme")
	w := ratelimittest.NewDiscardWriter()
	allocs := func(h http.Handler) float64 {
		h.ServeHTTP(w, req) // a Live binds its handlers on the first request
		return testing.AllocsPerRun(200, func() {
			w.Reset()
			h.ServeHTTP(w, req)
		})
	}
	if bare, live := allocs(set.Handler(okHandler)), allocs(config.NewLive(set).Handler(okHandler)); live > bare {
		t.Fatalf("%.1f allocs through a Live, %.1f through the Set", live, bare)
	}
}
