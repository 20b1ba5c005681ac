package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores/memory"
)

// keyHeader is the header that names a request's key in these tests.
const keyHeader = "X-Key"

// pairedLimiters builds two limiters of the one rule, each on a store of
// its own under clock: the first takes the direct path, whose allowed
// responses read their RateLimit values from the value cache and runs;
// the second, given a denied handler, takes the general path, which
// formats every value for its response alone. Fed the same requests at
// the same times, they decide alike, so the second's fields are what the
// first's must state.
func pairedLimiters(t *testing.T, ru Rule, clock Clock) (fast, general *Limiter) {
	t.Helper()
	fast = NewRulesLimiter([]Rule{ru}, WithClock(clock))
	general = NewRulesLimiter([]Rule{ru}, WithClock(clock),
		WithDeniedHandler(statusOnly))
	if fast.rules[0].fast == nil {
		t.Fatal("the first limiter does not take the direct path")
	}
	if general.rules[0].fast != nil {
		t.Fatal("the second limiter takes the direct path")
	}
	return fast, general
}

// statusOnly is a denied handler that writes the 429 alone: given one, a
// limiter takes the general path.
func statusOnly(w http.ResponseWriter, _ *http.Request, _ *Verdict) {
	w.WriteHeader(http.StatusTooManyRequests)
}

// tamperingHandler records the fields its response carries, then edits
// them in place and appends to them, as a careless handler might: no
// other response may see either edit.
func tamperingHandler(seen *http.Header) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = w.Header().Clone()
		for _, name := range []string{"Ratelimit", "Ratelimit-Policy"} { // as the map keys them
			v := w.Header()[name]
			v[0] = "tampered by " + r.Header.Get(keyHeader)
			w.Header()[name] = append(v, "appended")
		}
	})
}

// serveKey serves one request of key through h and returns the fields the
// handler saw (nil when denied) and the status.
func serveKey(h http.Handler, key string, seen *http.Header) (http.Header, int) {
	*seen = nil
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set(keyHeader, key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return w.Header(), w.Code
	}
	return *seen, w.Code
}

// TestFastPathValuesStateTheirOwnDecision: every allowed response of the
// direct path states the remaining count and delay of its own decision,
// the same value the general path formats for that decision, whatever
// the responses before it stated: several keys of one rule interleaved
// (sharing its value cache and runs), counts crossing 1000, 100 and 10
// and 10^9, a remaining count of 0, windows that reset, a clock that
// gives counts back, a key's state reset mid-run, and handlers that edit
// and append to every response's fields.
func TestFastPathValuesStateTheirOwnDecision(t *testing.T) {
	limits := []Limit{PerHour(1), PerHour(10), PerMinute(11), PerHour(101), PerMinute(1033),
		PerSecond(40), PerDay(1_000_000_020), PerDay(2_147_483_647)}
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindow, SlidingLog} {
		for _, limit := range limits {
			if alg == SlidingLog && limit.Rate > 10_000 {
				continue // a log of a timestamp per unit
			}
			t.Run(fmt.Sprintf("%v/%d-per-%v", alg, limit.Rate, limit.Period), func(t *testing.T) {
				compareValues(t, Rule{Name: "api", Algorithm: alg, Limit: limit, Key: ByHeader(keyHeader)})
			})
		}
	}
}

// compareValues drives the paired limiters of ru through a seeded schedule
// of keys, clock steps and resets and compares each response's fields.
func compareValues(t *testing.T, ru Rule) {
	clock := &stepClock{admittedTime(t)}
	fast, general := pairedLimiters(t, ru, clock)
	var seenFast, seenGeneral http.Header
	hf, hg := fast.Handler(tamperingHandler(&seenFast)), general.Handler(tamperingHandler(&seenGeneral))
	keys := []string{"a", "b", "c"}
	steps := []time.Duration{0, 0, 0, 0, time.Millisecond, 400 * time.Millisecond, time.Second,
		ru.Limit.Period / 3, ru.Limit.Period}
	rng := rand.New(rand.NewPCG(uint64(ru.Limit.Rate), uint64(ru.Algorithm)))
	allowed := 0
	for i := range 1500 {
		key := keys[rng.IntN(len(keys))]
		if i%5 != 0 { // mostly one key at a time, counting down through runs
			key = keys[i/50%len(keys)]
		}
		switch n := rng.IntN(400); {
		case n == 0:
			for _, l := range []*Limiter{fast, general} {
				if err := l.Reset(context.Background(), "api", key); err != nil {
					t.Fatal(err)
				}
			}
		case n < 40:
			clock.t = clock.t.Add(steps[rng.IntN(len(steps))])
			for rng.IntN(4) != 0 && !admitValue(clock.t.UnixNano()) {
				clock.t = clock.t.Add(1) // mostly to a time whose values are cached: runs start from them
			}
		}
		if sameFields(t, i, key, hf, hg, &seenFast, &seenGeneral) {
			allowed++
		}
	}
	if allowed < 20 {
		t.Fatalf("only %d of 1500 requests allowed: the schedule tests too little", allowed)
	}
}

// sameFields serves request i, of key, through the direct path's handler
// hf and the general path's hg, which record what their handlers see in
// seenFast and seenGeneral, and fails unless both decide alike and an
// allowed response states the same policy and RateLimit values in one
// field line each. It reports whether the request was allowed.
func sameFields(t *testing.T, i int, key string, hf, hg http.Handler, seenFast, seenGeneral *http.Header) bool {
	t.Helper()
	gotH, gotCode := serveKey(hf, key, seenFast)
	wantH, wantCode := serveKey(hg, key, seenGeneral)
	if gotCode != wantCode {
		t.Fatalf("request %d (key %s): status %d, the general path's %d", i, key, gotCode, wantCode)
	}
	if gotCode != http.StatusOK {
		return false
	}
	for _, name := range []string{"RateLimit", "RateLimit-Policy"} {
		if got, want := gotH.Values(name), wantH.Values(name); len(got) != 1 || !slices.Equal(got, want) {
			t.Fatalf("request %d (key %s): %s %q, the general path's %q", i, key, name, got, want)
		}
	}
	return true
}

// TestFastPathValuesAfterReloadStateTheNewLimit: a Reloadable that swaps in
// limiters of one rule name with other limits, on one store, states in
// each response the count and delay the new limit decides, not a value of
// the limiter before it, across limits of other digit lengths.
func TestFastPathValuesAfterReloadStateTheNewLimit(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindow} {
		t.Run(fmt.Sprint(alg), func(t *testing.T) {
			clock := &stepClock{admittedTime(t)}
			fastStore, generalStore := memory.New(memory.WithClock(clock)), memory.New(memory.WithClock(clock))
			var fast, general *Reloadable
			var seenFast, seenGeneral http.Header
			i := 0
			for _, rate := range []int{1033, 100, 11, 1033, 99, 1000} {
				ru := Rule{Name: "api", Algorithm: alg, Limit: PerHour(rate), Key: ByHeader(keyHeader)}
				f := NewRulesLimiter([]Rule{ru}, WithStore(fastStore))
				g := NewRulesLimiter([]Rule{ru}, WithStore(generalStore), WithDeniedHandler(statusOnly))
				if f.rules[0].fast == nil || g.rules[0].fast != nil {
					t.Fatal("the limiters do not take the paths the test expects")
				}
				if fast == nil {
					fast, general = NewReloadable(f), NewReloadable(g)
				} else {
					fast.Store(f)
					general.Store(g)
				}
				hf, hg := fast.Handler(tamperingHandler(&seenFast)), general.Handler(tamperingHandler(&seenGeneral))
				for range 45 {
					sameFields(t, i, "a", hf, hg, &seenFast, &seenGeneral)
					i++
				}
				for clock.t = clock.t.Add(time.Minute); !admitValue(clock.t.UnixNano()); {
					clock.t = clock.t.Add(1) // a time whose values are cached: runs start from them
				}
			}
		})
	}
}

// TestConcurrentHotKeysStateEachOfTheirCountsOnce: requests of two keys
// of one rule from many goroutines at once, on a clock that does not move,
// each get the RateLimit value of their own decision: each key's stated
// values are exactly those the general path states to one key counting
// down from the limit to 0 (each count with its own delay), each once,
// whichever requests format the shared runs and whatever the handlers do
// to their fields.
func TestConcurrentHotKeysStateEachOfTheirCountsOnce(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindow} {
		t.Run(fmt.Sprint(alg), func(t *testing.T) {
			const rate, workers = 1_048, 8 // counts across 1000, 100 and 10
			keys := []string{"a", "b"}
			ru := Rule{Name: "api", Algorithm: alg, Limit: PerHour(rate), Key: ByHeader(keyHeader)}
			l, general := pairedLimiters(t, ru, fixedClock{admittedTime(t)})
			want := countDownValues(t, general, rate)
			var mu sync.Mutex
			stated := map[string][]string{}
			var wg sync.WaitGroup
			for g := range workers {
				wg.Go(func() {
					var seen http.Header
					h := l.Handler(tamperingHandler(&seen))
					for i := range rate * len(keys) / workers {
						key := keys[(g+i)%len(keys)]
						got, code := serveKey(h, key, &seen)
						if code != http.StatusOK {
							t.Errorf("key %s: status %d, want 200", key, code)
							return
						}
						mu.Lock()
						stated[key] = append(stated[key], got.Get("RateLimit"))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, key := range keys {
				got := slices.Sorted(slices.Values(stated[key]))
				if !slices.Equal(got, want) {
					t.Fatalf("key %s: stated values differ from the decisions' (%d stated, %d decided)%s",
						key, len(got), len(want), firstDifference(got, want))
				}
			}
		})
	}
}

// countDownValues serves n requests of one key through l and returns the
// RateLimit values of its responses, sorted.
func countDownValues(t *testing.T, l *Limiter, n int) []string {
	t.Helper()
	var seen http.Header
	h := l.Handler(tamperingHandler(&seen))
	values := make([]string, 0, n)
	for range n {
		got, code := serveKey(h, "reference", &seen)
		if code != http.StatusOK {
			t.Fatalf("reference key: status %d, want 200", code)
		}
		values = append(values, got.Get("RateLimit"))
	}
	return slices.Sorted(slices.Values(values))
}

// firstDifference describes where two sorted lists of values first differ.
func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf(": at %d, %q, want %q", i, got[i], want[i])
		}
	}
	return ""
}
