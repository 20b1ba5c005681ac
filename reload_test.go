package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// genKey is a KeyFunc of generation gen: it records gen in the request's
// seen set, so a test can tell which snapshots decided a request.
type seenGens struct {
	mu   sync.Mutex
	gens map[int]bool
}

type seenKey struct{}

func genKey(gen int) ratelimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		s := r.Context().Value(seenKey{}).(*seenGens)
		s.mu.Lock()
		s.gens[gen] = true
		s.mu.Unlock()
		return "client", nil
	}
}

func TestReloadableUnderLoadDecidesEachRequestWithOneSnapshot(t *testing.T) {
	const clients, reloads, inflight = 64, 1000, 1000
	store := memory.New()
	build := func(gen int) *ratelimit.Limiter {
		rules := []ratelimit.Rule{
			{Name: "rate", Limit: ratelimit.Limit{Rate: 1 << 30, Period: time.Hour}, Key: genKey(gen)},
			{Name: "window", Limit: ratelimit.Limit{Rate: 1 << 30, Period: time.Hour}, Algorithm: ratelimit.SlidingWindow, Key: genKey(gen)},
		}
		if gen%2 == 0 { // odd generations drop the Concurrency rule while slots are held
			rules = append(rules, ratelimit.Rule{Name: "inflight", Limit: ratelimit.Limit{Rate: inflight, Period: time.Hour}, Algorithm: ratelimit.Concurrency, Key: genKey(gen)})
		}
		return ratelimit.NewRulesLimiter(rules, ratelimit.WithStore(store))
	}
	before := runtime.NumGoroutine()
	h := ratelimit.NewReloadable(build(0))
	var served atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		runtime.Gosched() // hold the slot across a possible reload
		w.WriteHeader(200)
	})
	mw := h.Handler(next)

	var stop atomic.Bool
	var errs, mixed, total atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := ratelimittest.NewDiscardWriter()
			for !stop.Load() {
				seen := &seenGens{gens: map[int]bool{}}
				req := ratelimittest.NewRequest("GET", "/api", "10.0.0.1:1")
				req = req.WithContext(context.WithValue(req.Context(), seenKey{}, seen))
				w.Reset()
				mw.ServeHTTP(w, req)
				total.Add(1)
				if w.Status() != 200 {
					errs.Add(1)
				}
				if len(seen.gens) != 1 {
					mixed.Add(1)
				}
			}
		}()
	}
	for gen := 1; gen <= reloads; gen++ {
		h.Store(build(gen))
		if gen%50 == 0 {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()

	if errs.Load() != 0 || mixed.Load() != 0 {
		t.Fatalf("%d requests: %d not 200, %d decided by more than one snapshot", total.Load(), errs.Load(), mixed.Load())
	}
	if served.Load() != total.Load() {
		t.Fatalf("served %d of %d", served.Load(), total.Load())
	}
	res, err := store.Take(context.Background(), stores.Request{
		Rule: "inflight", Key: "client", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: inflight, Period: time.Hour},
	})
	if err != nil || res.Remaining != inflight {
		t.Fatalf("after the load: %d of %d slots free (err %v); slots leaked across reloads", res.Remaining, inflight, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after, %d before", n, before)
	}
	t.Logf("%d requests over %d reloads", total.Load(), reloads)
}

func TestReloadableUnchangedConfigAdmitsExactlyLikeStatic(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			rules := func() []ratelimit.Rule {
				return []ratelimit.Rule{{Name: "ip", Limit: ratelimit.PerSecond(10), Key: ratelimit.Global(), Algorithm: alg}}
			}
			static := ratelimit.NewRulesLimiter(rules(), ratelimit.WithStore(memory.New(memory.WithClock(clock))), ratelimit.WithClock(clock)).Handler(ok)
			shared := memory.New(memory.WithClock(clock))
			h := ratelimit.NewReloadable(ratelimit.NewRulesLimiter(rules(), ratelimit.WithStore(shared), ratelimit.WithClock(clock)))
			reloaded := h.Handler(ok)
			rng := rand.New(rand.NewPCG(1, uint64(alg)))
			admitted := 0
			for i := range 1000 {
				h.Store(ratelimit.NewRulesLimiter(rules(), ratelimit.WithStore(shared), ratelimit.WithClock(clock)))
				for range rng.IntN(6) {
					a := ratelimittest.Do(static, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
					b := ratelimittest.Do(reloaded, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
					if a.Code != b.Code {
						t.Fatalf("reload %d: static %d, reloaded %d", i, a.Code, b.Code)
					}
					if a.Code == 200 {
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

func TestReloadableChangedLimitAppliesToFirstRequestAfterStore(t *testing.T) {
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memory.New(memory.WithClock(clock))
	build := func(n int) *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(n), Key: ratelimit.Global(), Name: "api", Algorithm: ratelimit.FixedWindow}}, ratelimit.WithStore(store), ratelimit.WithClock(clock))
	}
	h := ratelimit.NewReloadable(build(10))
	mw := h.Handler(ok)
	get := func() int { return ratelimittest.Do(mw, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1")).Code }
	for i := range 5 {
		if c := get(); c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	h.Store(build(3)) // 5 taken already: the lower limit denies at once
	if c := get(); c != 429 {
		t.Fatalf("first request after lowering the limit to 3 (5 used): %d, want 429", c)
	}
	h.Store(build(100)) // the same state under a higher limit admits at once
	if c := get(); c != 200 {
		t.Fatalf("first request after raising the limit: %d, want 200", c)
	}
	h.Store(build(6)) // 6 used now
	if c := get(); c != 429 {
		t.Fatalf("state was not kept across reloads: %d, want 429", c)
	}
}

func TestReloadableDoneReleasesThroughTheSnapshotThatTookTheSlot(t *testing.T) {
	store := memory.New()
	withConc := func() *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 1, Period: time.Hour}, Key: ratelimit.Global(), Name: "inflight", Algorithm: ratelimit.Concurrency}}, ratelimit.WithStore(store))
	}
	without := ratelimit.NewLimiter(ratelimit.PerSecond(1000), ratelimit.Global(), ratelimit.WithName("rate"), ratelimit.WithStore(store))
	h := ratelimit.NewReloadable(withConc())
	w := ratelimittest.NewDiscardWriter()
	done, admitted := h.Admit(w, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
	if !admitted {
		t.Fatal("first request denied")
	}
	h.Store(without) // the Concurrency rule is removed while its slot is held
	done()
	h.Store(withConc())
	w.Reset()
	done, admitted = h.Admit(w, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
	if !admitted {
		t.Fatalf("slot lost across the reload: status %d", w.Status())
	}
	done()
}

func TestReloadableRejectsNil(t *testing.T) {
	for name, f := range map[string]func(){
		"new": func() { ratelimit.NewReloadable(nil) },
		"store": func() {
			ratelimit.NewReloadable(ratelimit.NewLimiter(ratelimit.PerSecond(1), ratelimit.Global())).Store(nil)
		},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || fmt.Sprint(r)[:11] != "ratelimit: " {
					t.Errorf("%s: panic %v, want a ratelimit: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// TestReloadableAddsNoAllocation serves the same Limiter directly and
// through a Reloadable: the handle must not add an allocation.
func TestReloadableAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled objects at random")
	}
	l := ratelimit.NewLimiter(ratelimit.Limit{Rate: 1e9, Period: time.Second}, ratelimit.ByIP())
	skipped := ratelimit.NewLimiter(ratelimit.PerSecond(1), ratelimit.ByIP(), ratelimit.WithSkip(func(*http.Request) bool { return true }))
	for name, lim := range map[string]*ratelimit.Limiter{"limited": l, "skipped": skipped} {
		req := ratelimittest.NewRequest("GET", "/api/items", "10.0.0.1:1234")
		w := ratelimittest.NewDiscardWriter()
		allocs := func(h http.Handler) float64 {
			return testing.AllocsPerRun(500, func() {
				w.Reset()
				h.ServeHTTP(w, req)
			})
		}
		bare, reloadable := allocs(lim.Handler(ok)), allocs(ratelimit.NewReloadable(lim).Handler(ok))
		if reloadable != bare {
			t.Errorf("%s: %.1f allocs through a Reloadable, %.1f served directly", name, reloadable, bare)
		}
	}
}

// TestReloadableKeepsAnAdaptiveRulesRequestsInFlight: an adaptive rule
// fixed at 2 requests in flight, both held, then the same rules stored
// again (a reload of an unchanged file): a third request still finds the
// server at its limit. The adaptive state lives in the Limiter, not in a
// store, so the new Limiter starts with nothing in flight and admits 2
// more: each reload raises the concurrency bound by the requests still in
// flight under the old one.
func TestReloadableKeepsAnAdaptiveRulesRequestsInFlight(t *testing.T) {
	build := func() *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 2, Max: 2, Initial: 2}},
		})
	}
	h := ratelimit.NewReloadable(build())
	var dones []func()
	defer func() {
		for _, d := range dones {
			d()
		}
	}()
	for range 2 {
		done, ok := h.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
		if !ok {
			t.Fatal("setup: a request under the limit was rejected")
		}
		dones = append(dones, done)
	}
	h.Store(build())
	w := ratelimittest.NewDiscardWriter()
	done, ok := h.Admit(w, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
	if ok {
		dones = append(dones, done)
		t.Fatalf("after a reload of the same rules, a third request was admitted with 2 in flight under a limit of 2")
	}
	// The requests admitted before the reload give their slots back to the
	// state the new Limiter continues.
	dones[0]()
	dones = dones[1:]
	done, ok = h.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
	if !ok {
		t.Fatal("a slot released through the old Limiter did not free the continued state")
	}
	dones = append(dones, done)
	if got := h.Load().Adaptive("inflight"); len(got) != 1 || got[0].InFlight != 2 {
		t.Fatalf("Adaptive state after the reload: %+v, want one key with 2 in flight", got)
	}
}

// TestReloadableStartsAChangedAdaptiveRuleAfresh: an adaptive rule whose
// settings changed (a limit of 3 instead of 2) does not continue the old
// state: the new bound applies to the requests that arrive after Store.
func TestReloadableStartsAChangedAdaptiveRuleAfresh(t *testing.T) {
	build := func(n int) *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: n, Max: n, Initial: n}},
		})
	}
	h := ratelimit.NewReloadable(build(2))
	var dones []func()
	defer func() {
		for _, d := range dones {
			d()
		}
	}()
	admit := func() bool {
		done, ok := h.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
		if ok {
			dones = append(dones, done)
		}
		return ok
	}
	for range 2 {
		if !admit() {
			t.Fatal("setup: a request under the limit was rejected")
		}
	}
	h.Store(build(3))
	for i := range 3 {
		if !admit() {
			t.Fatalf("request %d under the new rule of 3 was rejected: the old state was continued", i)
		}
	}
	if admit() {
		t.Fatal("a fourth request was admitted under a limit of 3")
	}
}

// funcClock is a Clock made of a function: its values cannot be compared.
type funcClock func() time.Time

func (f funcClock) Now() time.Time { return f() }

// offsetClock wraps another Clock: a struct whose type is comparable, while
// the Clock it holds may not be.
type offsetClock struct {
	ratelimit.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time { return c.Clock.Now().Add(c.offset) }

// TestReloadableStoreWithAWrappedFuncClock: Reloadable.Store of adaptive
// rules whose clock is a comparable struct holding a func-typed Clock must
// not panic. sameSettings checks reflect.TypeOf(clock).Comparable(), true
// for the struct, then compares with ==, which panics at run time
// ("comparing uncomparable type") on the func inside: a reload takes the
// process down.
func TestReloadableStoreWithAWrappedFuncClock(t *testing.T) {
	clock := offsetClock{Clock: funcClock(time.Now)}
	build := func() *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(2)},
		}, ratelimit.WithClock(clock))
	}
	h := ratelimit.NewReloadable(build())
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Reloadable.Store panicked: %v", p)
		}
	}()
	h.Store(build())
}

// TestZeroReloadableRefusesUntilALimiterIsStored: a Reloadable declared
// as a zero value and used before its first Store never admits a request
// unlimited and never dereferences nil: Handler panics with the package's
// prefix, Admit answers 500, Peek and Reset return errors; once a Limiter
// is stored it decides.
func TestZeroReloadableRefusesUntilALimiterIsStored(t *testing.T) {
	var h ratelimit.Reloadable
	func() {
		defer func() {
			p := recover()
			if msg, _ := p.(string); !strings.HasPrefix(msg, "ratelimit: ") {
				t.Errorf("Handler on a zero Reloadable: panic %v, want a ratelimit: message", p)
			}
		}()
		h.Handler(http.NotFoundHandler())
	}()
	w := httptest.NewRecorder()
	if done, ok := h.Admit(w, httptest.NewRequest("GET", "/", nil)); ok {
		done()
		t.Fatal("a zero Reloadable admitted a request")
	}
	if w.Code != http.StatusInternalServerError {
		t.Errorf("Admit on a zero Reloadable answered %d, want 500", w.Code)
	}
	if _, err := h.Peek(context.Background(), "default", "k"); err == nil {
		t.Error("Peek on a zero Reloadable returned no error")
	}
	if err := h.Reset(context.Background(), "default", "k"); err == nil {
		t.Error("Reset on a zero Reloadable returned no error")
	}
	h.Store(ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.Global()))
	srv := h.Handler(http.NotFoundHandler())
	codes := []int{}
	for range 2 {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		codes = append(codes, w.Code)
	}
	if codes[0] != http.StatusNotFound || codes[1] != http.StatusTooManyRequests {
		t.Errorf("after Store: %v, want [404 429]", codes)
	}
}
