package ratelimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestStackedDirectPathAnswersAsTheGeneralPath: stacked rules on the
// memory store (a rate of each algorithm with a daily quota, a global
// rate, or both)
// take the direct path of stacked rules; the same rules on a store it does
// not recognise (generalPath) take the general one. Over random clients and
// moves of time (forward across midnights, backward), through every entry
// point (Handler, Check, ServeRoute with and without callbacks, Allow), both
// give the same status, fields and body, the same verdict or Allow result,
// with denials by one rule and by several.
func TestStackedDirectPathAnswersAsTheGeneralPath(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.SlidingLog} {
		for _, shape := range []string{"rate+daily", "rate+daily+all", "rate+all"} {
			t.Run(fmt.Sprintf("%v/%s", alg, shape), func(t *testing.T) {
				rules := func() []ratelimit.Rule {
					rs := []ratelimit.Rule{{Name: "rate", Limit: ratelimit.PerSecond(3), Key: ratelimit.ByIP(), Algorithm: alg}}
					if strings.Contains(shape, "daily") {
						rs = append(rs, ratelimit.Rule{Name: "daily", Quota: ratelimit.Daily(40, time.UTC), Key: ratelimit.ByIP()})
					}
					if strings.Contains(shape, "all") {
						rs = append(rs, ratelimit.Rule{Name: "all", Limit: ratelimit.PerSecond(5), Key: ratelimit.Global()})
					}
					return rs
				}
				start := time.Date(2026, 11, 27, 23, 59, 50, 0, time.UTC)
				fastClock, slowClock := ratelimittest.NewClock(start), ratelimittest.NewClock(start)
				fast := newEntryHandler(ratelimit.NewRulesLimiter(rules(), ratelimit.WithClock(fastClock)), okHandler)
				slow := newEntryHandler(ratelimit.NewRulesLimiter(rules(), ratelimit.WithClock(slowClock), generalPath(slowClock)), okHandler)
				rng := rand.New(rand.NewPCG(3, uint64(alg)))
				entries := rand.New(rand.NewPCG(4, uint64(alg)))
				bodies := map[string]int{} // of denials
				for i := range 4000 {
					step := time.Duration(rng.Int64N(int64(time.Second / 3)))
					switch rng.IntN(40) {
					case 0:
						step = -step // the clock goes back
					case 1:
						step = time.Duration(rng.Int64N(int64(30 * time.Hour))) // another day
					}
					fastClock.Advance(step)
					slowClock.Advance(step)
					a, b := httptest.NewRecorder(), httptest.NewRecorder()
					r := clientReq(rng.IntN(3))
					fast.entry = entries.IntN(entryPoints)
					slow.entry, fast.seen, slow.seen = fast.entry, nil, nil
					fast.ServeHTTP(a, r)
					slow.ServeHTTP(b, r)
					if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() ||
						!reflect.DeepEqual(fast.seen, slow.seen) {
						t.Fatalf("request %d through entry point %d: direct %d %v %q %q, general %d %v %q %q", i, fast.entry,
							a.Code, a.Header(), a.Body, fast.seen, b.Code, b.Header(), b.Body, slow.seen)
					}
					if a.Code == 429 {
						bodies[a.Body.String()]++
					}
				}
				if len(bodies) < 3 {
					t.Fatalf("denials by too few sets of rules to compare the paths: %v", bodies)
				}
			})
		}
	}
}

// TestStackedRulesOfOneKeyFuncAskItOnce: stacked rules given the same
// KeyFunc value (one variable, or ByIP, which is one func value) ask it
// once per request on the direct path; rules of KeyFuncs made apart ask
// each their own.
func TestStackedRulesOfOneKeyFuncAskItOnce(t *testing.T) {
	calls := 0
	counted := func(r *http.Request) (string, error) { calls++; return ratelimit.ByIP()(r) }
	other := func(r *http.Request) (string, error) { calls++; return ratelimit.ByIP()(r) }
	for _, c := range []struct {
		name string
		a, b ratelimit.KeyFunc
		want int
	}{
		{"one KeyFunc", counted, counted, 1},
		{"two KeyFuncs", counted, other, 2},
	} {
		h := ratelimit.NewRules([]ratelimit.Rule{
			{Name: "rate", Limit: ratelimit.PerSecond(100), Key: c.a},
			{Name: "daily", Quota: ratelimit.Daily(1000, time.UTC), Key: c.b},
		})(okHandler)
		calls = 0
		h.ServeHTTP(httptest.NewRecorder(), clientReq(1))
		if calls != c.want {
			t.Errorf("%s: the key functions were called %d times for a request, want %d", c.name, calls, c.want)
		}
	}
	a, b := ratelimit.ByIP(), ratelimit.ByIP()
	if *(*unsafe.Pointer)(unsafe.Pointer(&a)) != *(*unsafe.Pointer)(unsafe.Pointer(&b)) { // the closures, not their code
		t.Error("ByIP returns a new func value each call: rules keyed by it extract the key once each")
	}
}
