package ratelimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })

func clientReq(i int) *http.Request {
	r := httptest.NewRequest("GET", "/api/items", nil)
	r.RemoteAddr = fmt.Sprintf("10.0.%d.%d:1234", i>>8&255, i&255)
	return r
}

// TestDirectPathAnswersAsTheGeneralPath: a single static rule on the
// memory store takes the direct path; the same rule on a store the direct
// path does not recognise (generalPath) takes the general one. Over random clients, costs of time (forward,
// backward) and every algorithm the direct path serves, both give the same
// status, fields and body.
func TestDirectPathAnswersAsTheGeneralPath(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow} {
		for _, limit := range []ratelimit.Limit{ratelimit.PerSecond(3), ratelimit.PerMinute(7), {Rate: 5, Period: time.Hour, Burst: 9}} {
			if alg != ratelimit.GCRA && limit.Burst != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", alg, limit), func(t *testing.T) {
				start := time.Unix(1_700_000_000, 123)
				fastClock, slowClock := ratelimittest.NewClock(start), ratelimittest.NewClock(start)
				fast := ratelimit.NewRules([]ratelimit.Rule{{Limit: limit, Key: ratelimit.ByIP(), Algorithm: alg}}, ratelimit.WithClock(fastClock))(okHandler)
				slow := ratelimit.NewRules([]ratelimit.Rule{{Limit: limit, Key: ratelimit.ByIP(), Algorithm: alg}}, ratelimit.WithClock(slowClock),
					generalPath(slowClock))(okHandler)
				rng := rand.New(rand.NewPCG(1, uint64(alg)))
				denied := 0
				for i := range 3000 {
					step := time.Duration(rng.Int64N(int64(limit.Period / 4)))
					if rng.IntN(10) == 0 {
						step = -step // the clock goes back
					}
					fastClock.Advance(step)
					slowClock.Advance(step)
					a, b := httptest.NewRecorder(), httptest.NewRecorder()
					r := clientReq(rng.IntN(4))
					fast.ServeHTTP(a, r)
					slow.ServeHTTP(b, r)
					if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
						t.Fatalf("request %d: direct %d %v %q, general %d %v %q", i, a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
					}
					if a.Code == 429 {
						denied++
					}
				}
				if denied == 0 {
					t.Fatal("no request was denied: the test compared allow paths only")
				}
			})
		}
	}
}

// TestSharedDenialFieldsCannotBeEditedInPlace: a denial's field values are
// shared between responses. Whatever a handler or an outer middleware does
// to one response's fields (assign into the slices, append, set, delete),
// the next denial carries the right values.
func TestSharedDenialFieldsCannotBeEditedInPlace(t *testing.T) {
	clock := ratelimittest.NewClock(time.Unix(1_700_000_000, 0))
	h := ratelimit.New(ratelimit.PerHour(1), ratelimit.ByIP(), ratelimit.WithClock(clock))(okHandler)
	h.ServeHTTP(httptest.NewRecorder(), clientReq(1))
	want := httptest.NewRecorder()
	h.ServeHTTP(want, clientReq(1))
	if want.Code != 429 {
		t.Fatalf("status %d, want 429", want.Code)
	}
	wantHeader := want.Header().Clone()
	edits := []func(http.Header){
		func(h http.Header) {
			for _, v := range h {
				v[0] = "tampered"
			}
		},
		func(h http.Header) {
			for k := range h {
				h.Add(k, "appended")
			}
		},
		func(h http.Header) {
			for k := range h {
				h[k] = append(h[k], "appended")
			}
		},
		func(h http.Header) {
			for k := range h {
				h.Set(k, "set")
			}
		},
		func(h http.Header) {
			for k := range h {
				h.Del(k)
			}
		},
	}
	for i, edit := range edits {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, clientReq(1))
		edit(w.Header())
		again := httptest.NewRecorder()
		h.ServeHTTP(again, clientReq(1))
		if !reflect.DeepEqual(again.Header(), wantHeader) {
			t.Fatalf("edit %d: the next denial has %v, want %v", i, again.Header(), wantHeader)
		}
	}
}

// TestAllowedFieldsBelongToTheirResponse: a handler that assigns into the
// fields of its own allowed response changes no other response: every
// handler finds the right values, however the ones before it edited theirs.
func TestAllowedFieldsBelongToTheirResponse(t *testing.T) {
	const policy = `"ip-1000-per-1h";q=1000;w=3600` // the name derived from the key kind and limit
	h := ratelimit.New(ratelimit.PerHour(1000), ratelimit.ByIP())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := w.Header().Get("RateLimit-Policy"); p != policy {
			t.Errorf("policy %q reached the handler, want %q", p, policy)
		}
		for _, v := range w.Header() {
			v[0] = "tampered"
		}
	}))
	for i := range 10 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, clientReq(i%3))
		if got := w.Header().Get("RateLimit"); got != "tampered" {
			t.Fatalf("the handler's own edit did not stick: %q", got)
		}
	}
}

// TestHotPathAllocations: a denied request costs no allocation and an
// allowed one at most one, on the default configuration (the round trip
// of BenchmarkMiddleware). It fails if the hot path regresses.
func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	for _, c := range allocCases {
		for _, keys := range []int{1, 1000} {
			h := ratelimit.New(c.limit, ratelimit.ByIP())(okHandler)
			reqs := make([]*http.Request, keys)
			for i := range reqs {
				reqs[i] = clientReq(i)
				h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i])
			}
			w := ratelimittest.NewDiscardWriter()
			i := 0
			got := testing.AllocsPerRun(2000, func() {
				w.Reset()
				h.ServeHTTP(w, reqs[i%keys])
				i++
			})
			if w.Status() != c.want {
				t.Fatalf("%s keys=%d: status %d, want %d", c.name, keys, w.Status(), c.want)
			}
			if got > c.max {
				t.Errorf("%s keys=%d: %.1f allocations per request, want at most %.0f", c.name, keys, got, c.max)
			}
		}
	}
}

// TestRateLimitValueOfAnyLength: remaining counts and delays of every
// length, and a long rule name, give the same RateLimit value on the direct
// path as on the general one (the buffer's size is chosen from an estimate
// of the digits).
func TestRateLimitValueOfAnyLength(t *testing.T) {
	long := "a-rule-name-of-some-length-to-overflow-the-small-buffer-0123456"
	for _, name := range []string{"default", long} {
		for _, rate := range []int{1, 9, 10, 11, 99, 100, 101, 1e9, 1<<31 - 1} {
			for _, period := range []time.Duration{time.Second, time.Hour, 400_000 * time.Hour} {
				limit := ratelimit.Limit{Rate: rate, Period: period}
				if limit.Validate() != nil {
					continue
				}
				fast := ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithName(name))(okHandler)
				slow := ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithName(name), generalPath(stores.SystemClock()))(okHandler)
				a, b := httptest.NewRecorder(), httptest.NewRecorder()
				fast.ServeHTTP(a, clientReq(1))
				slow.ServeHTTP(b, clientReq(1))
				got, want := a.Header().Get("RateLimit"), b.Header().Get("RateLimit")
				if got != want || !strings.HasPrefix(got, strconv.Quote(name)) {
					t.Errorf("%v: RateLimit %q, want %q", limit, got, want)
				}
			}
		}
	}
}

// TestWindowDelayOfAnyLength: the direct path states a window's delay, of
// one digit to many (a window ends in seconds or in years), as the general
// path does.
func TestWindowDelayOfAnyLength(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		for _, period := range []time.Duration{10 * time.Second, 5 * time.Minute, time.Hour, 3 * time.Hour, 400_000 * time.Hour} {
			limit := ratelimit.Limit{Rate: 1e6, Period: period}
			start := time.Unix(1_700_000_000, 0)
			fastClock, slowClock := ratelimittest.NewClock(start), ratelimittest.NewClock(start)
			rule := []ratelimit.Rule{{Limit: limit, Key: ratelimit.ByIP(), Algorithm: alg}}
			fast := ratelimit.NewRules(rule, ratelimit.WithClock(fastClock))(okHandler)
			slow := ratelimit.NewRules(rule, ratelimit.WithClock(slowClock), generalPath(slowClock))(okHandler)
			for i := range 200 {
				step := time.Duration(i) * period / 199 // across a window, to its end
				fastClock.Advance(step / 50)
				slowClock.Advance(step / 50)
				a, b := httptest.NewRecorder(), httptest.NewRecorder()
				fast.ServeHTTP(a, clientReq(i%3))
				slow.ServeHTTP(b, clientReq(i%3))
				if got, want := a.Header().Get("RateLimit"), b.Header().Get("RateLimit"); got != want {
					t.Fatalf("%v %v, check %d: RateLimit %q, want %q", alg, period, i, got, want)
				}
			}
		}
	}
}

// generalPath keeps a limiter off the direct path, for comparisons: its
// store is the in-process one, reading clock, behind a wrapper the direct
// path does not recognise.
func generalPath(clock ratelimit.Clock) ratelimit.Option {
	return ratelimit.WithStore(struct{ ratelimit.Store }{memory.New(memory.WithClock(clock))})
}
