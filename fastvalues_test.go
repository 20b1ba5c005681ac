package ratelimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// fixedClock is a Clock that reads one time, so that a test knows whether
// a value that missed the cache was put into it.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// admittedTime returns a time at which admitValue caches what missed.
func admittedTime(t *testing.T) time.Time {
	base := time.Unix(1_700_000_000, 0)
	for ns := range int64(1000) {
		if at := base.Add(time.Duration(ns)); admitValue(at.UnixNano()) {
			return at
		}
	}
	t.Fatal("admitValue admitted none of 1000 times")
	return time.Time{}
}

// TestValueCacheReturnsOnlyTheValueAsked: a value comes back for its own
// remaining count and delay only, and one that displaced it from its slot
// is not mistaken for it.
func TestValueCacheReturnsOnlyTheValueAsked(t *testing.T) {
	var c valueCache
	a := &rateLimitValue{remaining: 5, t: 1, s: "a"}
	c.put(a)
	if got := c.get(5, 1); got != a {
		t.Fatalf("get(5, 1) = %v, want %v", got, a)
	}
	for _, k := range [][2]int64{{5, 2}, {4, 1}, {1, 5}, {5 + 64, 1}} {
		if got := c.get(k[0], k[1]); got != nil {
			t.Fatalf("get(%d, %d) = %v, want nil", k[0], k[1], got)
		}
	}
	b := &rateLimitValue{remaining: 5 + 64, t: 1, s: "b"} // a's slot
	if c.slot(b.remaining, b.t) != c.slot(a.remaining, a.t) {
		t.Fatal("the test expects a and b to share a slot")
	}
	c.put(b)
	if got := c.get(5, 1); got != nil {
		t.Fatalf("after b displaced a, get(5, 1) = %v, want nil", got)
	}
	if got := c.get(5+64, 1); got != b {
		t.Fatalf("get(69, 1) = %v, want %v", got, b)
	}
}

// TestCachedValueIsSharedAndItsSlicesAreNot: the first requests of three
// clients state the same remaining count and delay, so the later responses
// reuse the first one's RateLimit string, but each response has slices of
// its own: a handler that assigns into them changes no other response.
func TestCachedValueIsSharedAndItsSlicesAreNot(t *testing.T) {
	l := NewLimiter(PerHour(1000), ByIP(), WithClock(fixedClock{admittedTime(t)}))
	if l.rules[0].fast == nil {
		t.Fatal("the rule does not take the direct path")
	}
	var values []string
	for i, addr := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		var seen http.Header
		h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = w.Header().Clone()
			for _, v := range w.Header() {
				v[0] = "tampered by " + r.RemoteAddr
			}
		}))
		h.ServeHTTP(w, r)
		want := `"ip-1000-per-1h";r=999;t=4`
		if got := seen.Get("RateLimit"); got != want {
			t.Fatalf("request %d: the handler saw RateLimit %q, want %q", i, got, want)
		}
		values = append(values, seen.Get("RateLimit"))
		if got := w.Header().Get("RateLimit"); got != "tampered by "+addr {
			t.Fatalf("request %d: the handler's own edit did not stick: %q", i, got)
		}
	}
	for i := 1; i < len(values); i++ {
		if unsafe.StringData(values[i]) != unsafe.StringData(values[0]) {
			t.Errorf("response %d did not reuse the cached RateLimit value", i)
		}
	}
}

// TestSettledRuleSharesTheCachedValue: a settled rule's responses state
// their RateLimit value as a plain rule's do, from the rule's cache once a
// first response put it there, on Handler's path and on ServeRoute's,
// instead of formatting it again for every request.
func TestSettledRuleSharesTheCachedValue(t *testing.T) {
	for _, routed := range []bool{false, true} {
		l := NewRulesLimiter([]Rule{{Limit: PerHour(1000), Key: ByIP(), Settled: true}},
			WithClock(fixedClock{admittedTime(t)}))
		if l.rules[0].fast == nil {
			t.Fatal("the rule does not take the direct path")
		}
		var values []string
		for i, addr := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = addr
			w := httptest.NewRecorder()
			var got string
			if routed {
				l.ServeRoute(w, r, "/", nil, nil, func(*http.Request) error {
					got = w.Header().Get("RateLimit")
					return nil
				})
			} else {
				l.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					got = w.Header().Get("RateLimit")
				})).ServeHTTP(w, r)
			}
			if want := `"ip-1000-per-1h";r=999;t=4`; got != want {
				t.Fatalf("routed %v, request %d: RateLimit %q, want %q", routed, i, got, want)
			}
			values = append(values, got)
		}
		for i := 1; i < len(values); i++ {
			if unsafe.StringData(values[i]) != unsafe.StringData(values[0]) {
				t.Errorf("routed %v: response %d did not reuse the cached RateLimit value", routed, i)
			}
		}
	}
}

// countDown serves n requests of one client under a limiter of one rule
// of algorithm alg, rate per hour, on a clock that never moves, from
// workers goroutines at once, and returns the RateLimit values of the
// responses.
func countDown(t *testing.T, alg Algorithm, rate, n, workers int) []string {
	t.Helper()
	l := NewRulesLimiter([]Rule{{Algorithm: alg, Limit: PerHour(rate), Key: ByIP()}},
		WithClock(fixedClock{admittedTime(t)}))
	if l.rules[0].fast == nil {
		t.Fatal("the rule does not take the direct path")
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	values := make([][]string, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for range n / workers {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Errorf("status %d, want 200", w.Code)
					return
				}
				values[g] = append(values[g], w.Header().Get("RateLimit"))
			}
		})
	}
	wg.Wait()
	return slices.Concat(values...)
}

// remainingOf parses the remaining count of a RateLimit value, checking
// that the rest of it is want's.
func remainingOf(t *testing.T, value, want string) int {
	t.Helper()
	head, rest, ok := strings.Cut(value, ";r=")
	count, tail, _ := strings.Cut(rest, ";")
	wantHead, wantRest, _ := strings.Cut(want, ";r=")
	_, wantTail, _ := strings.Cut(wantRest, ";")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || head != wantHead || tail != wantTail || strconv.Itoa(n) != count {
		t.Fatalf("RateLimit %q is not %q with another count", value, want)
	}
	return n
}

// TestHotKeyValuesStateEachCountOnce: a key counting down through its limit
// gets, request after request, the values of a run formatted ahead (see
// valueRun), across the counts that have a digit fewer than the one
// before: each response states its own count, in the same form as a
// value formatted for it alone, and every count from the limit down is
// stated once, whichever of the concurrent requests formats a run.
func TestHotKeyValuesStateEachCountOnce(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow} {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("%v/%d", alg, workers), func(t *testing.T) {
				const rate = 1_100
				values := countDown(t, alg, rate, rate, workers)
				seen := make([]bool, rate)
				for _, v := range values {
					n := remainingOf(t, v, values[0])
					if n < 0 || n >= rate || seen[n] {
						t.Fatalf("remaining %d stated twice or out of range", n)
					}
					seen[n] = true
				}
			})
		}
	}
}

// TestHotKeyValuesShareOneBuffer: the values of a key counting down are
// formatted a run at a time into one buffer, which the responses share:
// successive counts lie back to back in memory, rather than each in an
// allocation of its own response.
func TestHotKeyValuesShareOneBuffer(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindow} {
		t.Run(fmt.Sprint(alg), func(t *testing.T) {
			values := countDown(t, alg, 1_000_000, 1_000, 1)
			adjacent := 0
			for i := 1; i < len(values); i++ {
				end := uintptr(unsafe.Pointer(unsafe.StringData(values[i-1]))) + uintptr(len(values[i-1]))
				if uintptr(unsafe.Pointer(unsafe.StringData(values[i]))) == end {
					adjacent++
				}
			}
			if adjacent < len(values)*3/4 {
				t.Errorf("%d of %d successive values lie back to back, want most", adjacent, len(values)-1)
			}
		})
	}
}

// stepClock is a Clock that a test moves.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// TestValuesOfNewDelaysFormatNoRunEach: a key whose every request states
// another delay (a window's end a second closer each time) and a count
// that continues the rule's run gets each value formatted alone, not as the
// first of a run of values that nothing will state; and so does a key
// that got its count back (its values climb above the run).
func TestValuesOfNewDelaysFormatNoRunEach(t *testing.T) {
	for _, c := range []struct {
		name string
		alg  Algorithm
		step time.Duration // between the requests that follow the countdown
	}{
		{"a new delay each request", FixedWindow, time.Second},
		{"a count back each request", GCRA, 12 * time.Second}, // two counts back, one taken
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &stepClock{admittedTime(t)}
			l := NewRulesLimiter([]Rule{{Algorithm: c.alg, Limit: PerHour(600), Key: ByIP()}}, WithClock(clock))
			f := l.rules[0].fast
			if f == nil {
				t.Fatal("the rule does not take the direct path")
			}
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			serve := func() {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1"
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			for range 100 { // counting down: the values of runs
				serve()
			}
			if f.values.run.Load() == nil {
				t.Fatal("a key counting down formatted no run")
			}
			runs := map[*valueRun]bool{}
			for range 100 {
				clock.t = clock.t.Add(c.step)
				serve()
				runs[f.values.run.Load()] = true
			}
			if len(runs) > 3 { // the run they found, and the next ones of its count
				t.Errorf("100 requests formatted %d runs, want at most 3", len(runs))
			}
		})
	}
}
