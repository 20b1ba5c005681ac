package ratelimit_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// allocsPerRequest serves h 2000 times, round-robin over 100 clients that
// have each been served once, and returns the allocations per request and
// the last status.
func allocsPerRequest(h http.Handler) (float64, int) {
	reqs := make([]*http.Request, 100)
	for i := range reqs {
		reqs[i] = clientReq(i)
		h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i])
	}
	w := ratelimittest.NewDiscardWriter()
	i := 0
	got := testing.AllocsPerRun(2000, func() {
		w.Reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	})
	return got, w.Status()
}

// heapBytesPerRequest serves h n times, round-robin over 100 clients that
// have each been served once, and returns the heap bytes allocated per
// request and the last status. The package's tests do not run in
// parallel, so nothing else allocates meanwhile but the runtime.
func heapBytesPerRequest(h http.Handler, n int) (float64, int) {
	reqs := make([]*http.Request, 100)
	for i := range reqs {
		reqs[i] = clientReq(i)
		h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i])
	}
	w := ratelimittest.NewDiscardWriter()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		w.Reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n), w.Status()
}

// allocCases are the two paths of the allocation tests: a limit that
// never denies, whose requests may allocate once (their fields), and a
// spent one, whose requests allocate nothing.
var allocCases = []struct {
	name  string
	limit ratelimit.Limit
	want  int
	max   float64
}{
	{"allow", ratelimit.Limit{Rate: 1e9, Period: time.Second}, http.StatusOK, 1},
	{"deny", ratelimit.PerHour(1), http.StatusTooManyRequests, 0},
}

// TestStackedRulesAllocations: a rate stacked on a daily quota, the
// configuration users write most after a single rule, costs an allowed
// request at most one allocation (its fields) and a denied one none: the
// quota's policy item, its window and the denial's fields are worked out
// once, not per request.
func TestStackedRulesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	for _, c := range allocCases {
		got, status := allocsPerRequest(ratelimit.NewRules([]ratelimit.Rule{
			{Name: "rate", Limit: c.limit, Key: ratelimit.ByIP()},
			{Name: "daily", Quota: ratelimit.Daily(1_000_000_000, time.UTC), Key: ratelimit.ByIP()},
		})(okHandler))
		if status != c.want {
			t.Fatalf("%s: status %d, want %d", c.name, status, c.want)
		}
		if got > c.max {
			t.Errorf("%s: %.1f allocations per request, want at most %.0f", c.name, got, c.max)
		}
	}
}

// TestSettledRuleAllocations: a request admitted under a settled rule, on
// the in-process store, carries what Settle needs to its handler, with the
// response's fields, on a writer of its own: its one allocation, where a
// copy of the request with a context of its own cost one of 416 bytes. A
// denied request allocates nothing.
func TestSettledRuleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	for _, c := range allocCases {
		settled := 0
		h := ratelimit.NewRules([]ratelimit.Rule{{Name: "settled", Limit: c.limit, Key: ratelimit.ByIP(), Settled: true}})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if ratelimit.Settle(r.Context(), w, 1) {
					settled++
				}
			}))
		got, status := allocsPerRequest(h)
		if status != c.want {
			t.Fatalf("%s: status %d, want %d", c.name, status, c.want)
		}
		if c.want == http.StatusOK && settled == 0 {
			t.Fatalf("%s: no handler could settle", c.name)
		}
		if got > c.max {
			t.Errorf("%s: %.2f allocations per request, want at most %.0f", c.name, got, c.max)
		}
	}
}

// TestSettledRuleHeapBytes: an allowed request under a settled rule whose
// handler never settles costs the heap its writer, one allocation of 64
// bytes, no more than a plain rule's request costs for its fields and
// their value: the writer holds no buffer of its own for a value that the
// rule's cache already holds.
func TestSettledRuleHeapBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: byte counts say nothing")
	}
	h := ratelimit.NewRules([]ratelimit.Rule{{Name: "settled", Limit: allocCases[0].limit,
		Key: ratelimit.ByIP(), Settled: true}})(okHandler)
	got, status := heapBytesPerRequest(h, 6400)
	if status != http.StatusOK {
		t.Fatalf("status %d, want %d", status, http.StatusOK)
	}
	// 64 bytes of writer, and room for the odd value that missed the
	// cache.
	if got > 80 {
		t.Errorf("%.1f heap bytes per request, want at most 80", got)
	}
}

// TestConcurrencyRuleAllocations: a request admitted under a Concurrency
// rule on the in-process store holds its slot without allocating for it:
// what it holds is recycled once it has been served, and the store reads
// no context, so none is kept. Its fields are the one allocation.
func TestConcurrencyRuleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	for _, h := range []http.Handler{
		ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
			Limit: ratelimit.Limit{Rate: 1000, Period: time.Minute}, Key: ratelimit.ByIP()}})(okHandler),
		ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
			Limit: ratelimit.Limit{Rate: 1000, Period: time.Minute}, Key: ratelimit.ByIP()}}, ratelimit.WithStore(memory.New()))(okHandler),
	} {
		got, status := allocsPerRequest(h)
		if status != http.StatusOK {
			t.Fatalf("status %d, want 200", status)
		}
		if got > 1 {
			t.Errorf("%.1f allocations per request, want at most 1", got)
		}
	}
}

// TestAllowAllocatesNothing: Allow on one rule on the in-process store
// costs no allocation, allowed or denied.
func TestAllowAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	ctx := t.Context()
	for _, limit := range []ratelimit.Limit{{Rate: 1e9, Period: time.Second}, ratelimit.PerHour(1)} {
		l := ratelimit.NewLimiter(limit, ratelimit.ByIP())
		if a := testing.AllocsPerRun(1000, func() { _, _ = l.Allow(ctx, "k") }); a != 0 {
			t.Errorf("Allow under %v: %.1f allocations, want 0", limit, a)
		}
	}
}

// TestCheckAndAdmitHoldLittle: Check and Admit of a request admitted under
// a Concurrency or settled rule on the in-process store hand back what it
// holds in one small allocation (Admit, besides, its done function and the
// response's fields), not in the
// general path's record of every rule, which cost 576 bytes a request.
// What is held is given back: every round is admitted again.
func TestCheckAndAdmitHoldLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: byte counts say nothing")
	}
	for _, ru := range []ratelimit.Rule{
		{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Key: ratelimit.ByIP()},
		{Name: "settled", Limit: ratelimit.Limit{Rate: 1e9, Period: time.Second}, Key: ratelimit.ByIP(), Settled: true},
	} {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{ru})
		r := clientReq(1)
		w := ratelimittest.NewDiscardWriter()
		for _, entry := range []struct {
			name           string
			allocs, bytes  float64
			admitAndGiveUp func() bool
		}{
			{"Check", 1, 128, func() bool { v := l.Check(r); v.Done(); return v.Allowed() }},
			{"Admit", 3, 176, func() bool { w.Reset(); done, ok := l.Admit(w, r); done(); return ok }},
		} {
			const n = 4000
			admitted := 0
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range n {
				if entry.admitAndGiveUp() {
					admitted++
				}
			}
			runtime.ReadMemStats(&after)
			if admitted != n {
				t.Fatalf("%s under %s: %d of %d requests admitted: what one held was not given back", entry.name, ru.Name, admitted, n)
			}
			if got := testing.AllocsPerRun(1000, func() { entry.admitAndGiveUp() }); got > entry.allocs {
				t.Errorf("%s under %s: %.1f allocations a request, want at most %.0f", entry.name, ru.Name, got, entry.allocs)
			}
			if got := float64(after.TotalAlloc-before.TotalAlloc) / n; got > entry.bytes {
				t.Errorf("%s under %s: %.1f heap bytes a request, want at most %.0f", entry.name, ru.Name, got, entry.bytes)
			}
		}
	}
}

// TestAdmitUnderASettledRuleAllocatesAsAPlainRule: Admit cannot carry a
// request to Settle, so under a settled rule on the in-process store its
// admission has nothing to settle when done: it allocates no record and
// no done function beyond what Admit under the same rule, not settled,
// allocates.
func TestAdmitUnderASettledRuleAllocatesAsAPlainRule(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	var allocs [2]float64
	for i, settled := range []bool{false, true} {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "tokens", Limit: ratelimit.Limit{Rate: 1e9, Period: time.Second},
			Key: ratelimit.ByIP(), Settled: settled}})
		w := ratelimittest.NewDiscardWriter()
		r := clientReq(1)
		allocs[i] = testing.AllocsPerRun(1000, func() {
			w.Reset()
			done, ok := l.Admit(w, r)
			done()
			if !ok {
				t.Fatal("denied")
			}
		})
	}
	if allocs[1] > allocs[0] {
		t.Errorf("Admit and done: %.1f allocations a request under a settled rule, %.1f under the same rule not settled", allocs[1], allocs[0])
	}
}

// TestAdaptiveBesideAHoldingRuleKeepsTheDirectPath: a request admitted by
// an adaptive rule and then by a Concurrency or settled rule on the
// in-process store takes that rule's direct path: what it holds under
// both is one record of 576 bytes, beside its fields (and a settled
// rule's writer). The general path's decision costs 128 bytes more.
func TestAdaptiveBesideAHoldingRuleKeepsTheDirectPath(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: byte counts say nothing")
	}
	for _, c := range []struct {
		rule  ratelimit.Rule
		bytes float64
	}{
		{ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1000, Period: time.Minute}, Key: ratelimit.ByIP()}, 640},
		{ratelimit.Rule{Name: "settled", Limit: ratelimit.Limit{Rate: 1e9, Period: time.Second}, Key: ratelimit.ByIP(), Settled: true}, 704},
	} {
		h := ratelimit.NewRules([]ratelimit.Rule{
			{Name: "adaptive", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 1 << 16, Max: 1 << 16, Initial: 1 << 16}},
			c.rule,
		})(okHandler)
		got, status := heapBytesPerRequest(h, 4000)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", c.rule.Name, status)
		}
		if got > c.bytes {
			t.Errorf("%s after an adaptive rule: %.1f heap bytes a request, want at most %.0f (the direct path's)", c.rule.Name, got, c.bytes)
		}
	}
}
