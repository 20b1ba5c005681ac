package ratelimit_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// nestingHandler serves a request and, while it is in flight, depth[0]
// more requests of the same client through h (each one in turn holding its
// own slot while the next is served), recording every response: requests
// in flight together without goroutines, so that a Concurrency rule fills
// up deterministically.
type nestingHandler struct {
	h     http.Handler
	depth int
	rec   []*httptest.ResponseRecorder
	panic bool // the innermost admitted request's handler panics
}

func (n *nestingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n.depth == 0 {
		if n.panic {
			panic("handler failed")
		}
		return
	}
	n.depth--
	rec := httptest.NewRecorder()
	n.rec = append(n.rec, rec)
	n.h.ServeHTTP(rec, r)
}

// TestConcurrencyDirectPathAnswersAsTheGeneralPath: a Concurrency rule on
// the memory store takes the direct path; on a store it does not recognise
// (generalPath), the general one. With requests in flight together (nested
// in one another's handlers, up to past the limit) and handlers that
// panic, both give the same statuses, fields and bodies, and both give
// every slot back: after each round, a full set of requests is admitted
// again. Each round goes through one of the entry points (Handler, Check,
// ServeRoute with and without callbacks), whose verdicts agree too.
func TestConcurrencyDirectPathAnswersAsTheGeneralPath(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	var paths [2]*nestingHandler
	var entries [2]*entryHandler
	for i, opt := range []func(ratelimit.Clock) ratelimit.Option{
		func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) },
		generalPath,
	} {
		clock := ratelimittest.NewClock(start)
		n := &nestingHandler{}
		entries[i] = newEntryHandler(ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
			Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Key: ratelimit.ByIP()}}, ratelimit.WithClock(clock), opt(clock)), n)
		n.h = entries[i]
		paths[i] = n
	}
	rng := rand.New(rand.NewPCG(9, 9))
	denied := 0
	for round := range 500 {
		depth, panics, client := rng.IntN(6), rng.IntN(4) == 0, rng.IntN(3)
		entry := rng.IntN(viaAllow) // Allow would hold its slot for ever
		var recs [2][]*httptest.ResponseRecorder
		for i, n := range paths {
			n.depth, n.panic, n.rec = depth, panics, nil
			entries[i].entry, entries[i].seen = entry, nil
			outer := httptest.NewRecorder()
			func() {
				defer func() {
					if p := recover(); p != nil && !panics {
						panic(p)
					}
				}()
				n.h.ServeHTTP(outer, clientReq(client))
			}()
			recs[i] = append([]*httptest.ResponseRecorder{outer}, n.rec...)
		}
		if len(recs[0]) != len(recs[1]) || !reflect.DeepEqual(entries[0].seen, entries[1].seen) {
			t.Fatalf("round %d through entry point %d: %d responses on the direct path, %d on the general; verdicts %q, %q",
				round, entry, len(recs[0]), len(recs[1]), entries[0].seen, entries[1].seen)
		}
		for j := range recs[0] {
			a, b := recs[0][j], recs[1][j]
			if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
				t.Fatalf("round %d, response %d: direct %d %v %q, general %d %v %q", round, j, a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
			}
			if a.Code == http.StatusTooManyRequests {
				denied++
			}
		}
	}
	if denied == 0 {
		t.Fatal("no request was denied: the test compared allow paths only")
	}
}

// TestConcurrencyDirectPathReleasesOnPanic: a request admitted on the
// direct path whose handler panics gives its slot back: a rule of one slot
// admits the next request.
func TestConcurrencyDirectPathReleasesOnPanic(t *testing.T) {
	n := &nestingHandler{panic: true}
	n.h = ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 1, Period: time.Hour}, Key: ratelimit.ByIP()}})(n)
	for i := range 3 {
		n.panic = i < 2
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }()
			n.h.ServeHTTP(w, clientReq(1))
		}()
		if w.Code == http.StatusTooManyRequests {
			t.Fatalf("request %d denied: a panicking handler kept its slot", i)
		}
	}
}

// TestSettledDirectPathAnswersAsTheGeneralPath: a settled rule on the
// memory store takes the direct path; on a store it does not recognise
// (generalPath), the general one. With handlers that settle more or less
// than the estimate, or not at all, and moves of time, through every entry
// point (Handler, Check, ServeRoute with and without callbacks, Allow),
// both give the same statuses, fields and bodies, the same verdicts or
// Allow results, and Settle the same answers.
func TestSettledDirectPathAnswersAsTheGeneralPath(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			var handlers [2]*entryHandler
			var actual int // what the handler settles; 0: it does not
			var settled [2]bool
			var clocks [2]*ratelimittest.Clock
			for i, opt := range []func(ratelimit.Clock) ratelimit.Option{
				func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) },
				generalPath,
			} {
				clock := ratelimittest.NewClock(start)
				next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if actual > 0 {
						settled[i] = ratelimit.Settle(r.Context(), w, actual)
					}
				})
				handlers[i] = newEntryHandler(ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "tokens", Algorithm: alg, Settled: true,
					Limit: ratelimit.PerSecond(20), Key: ratelimit.ByIP()}}, ratelimit.WithClock(clock), opt(clock)), next)
				clocks[i] = clock
			}
			rng := rand.New(rand.NewPCG(13, uint64(alg)))
			entries := rand.New(rand.NewPCG(14, uint64(alg)))
			denied := 0
			for i := range 3000 {
				step := time.Duration(rng.Int64N(int64(time.Second / 5)))
				if rng.IntN(10) == 0 {
					step = -step
				}
				clocks[0].Advance(step)
				clocks[1].Advance(step)
				actual = rng.IntN(4) * rng.IntN(6) // often 0: not settled
				settled = [2]bool{}
				a, b := httptest.NewRecorder(), httptest.NewRecorder()
				r := clientReq(rng.IntN(3))
				entry := entries.IntN(entryPoints)
				for _, h := range handlers {
					h.entry, h.seen = entry, nil
				}
				handlers[0].ServeHTTP(a, r)
				handlers[1].ServeHTTP(b, r)
				if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() || settled[0] != settled[1] ||
					!reflect.DeepEqual(handlers[0].seen, handlers[1].seen) {
					t.Fatalf("request %d through entry point %d: direct %d %v %q settled %v %q, general %d %v %q settled %v %q", i, entry,
						a.Code, a.Header(), a.Body, settled[0], handlers[0].seen, b.Code, b.Header(), b.Body, settled[1], handlers[1].seen)
				}
				if a.Code == http.StatusTooManyRequests {
					denied++
				}
			}
			if denied == 0 {
				t.Fatal("no request was denied: the test compared allow paths only")
			}
		})
	}
}

// TestConcurrencyHotKeyReleasesReachOnlyTheirOwnSlots: one key's requests
// hold every slot of a Concurrency rule on the direct path (the key hot in
// its store) when the key is Reset, and a new set of requests fills the
// fresh key; when the first set finishes, its releases free nothing of the
// second's. Time then moves past the Period: the second set's slots expire,
// each on its own, and a third set is admitted; the second's late
// releases free nothing of the third's. Round after round, so every slot
// of each round came back: the next round admits a full set again.
func TestConcurrencyHotKeyReleasesReachOnlyTheirOwnSlots(t *testing.T) {
	const rate, rounds = 3, 40
	clock := ratelimittest.NewClock(time.Unix(1_700_000_000, 0))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: rate, Period: time.Minute}, Key: ratelimit.Global()}}, ratelimit.WithClock(clock))
	type gate struct {
		in   sync.WaitGroup // the set's handlers entered
		out  chan struct{}  // closed to let them return
		done sync.WaitGroup // the set's requests served
	}
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := r.Context().Value(gateKey{}).(*gate)
		if !ok { // a request past the limit, admitted
			return
		}
		g.in.Done()
		<-g.out
	}))
	hold := func(what string) *gate { // a full set of requests, held in their handlers
		g := &gate{out: make(chan struct{})}
		g.in.Add(rate)
		for range rate {
			g.done.Go(func() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("GET", "/", nil)
				h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), gateKey{}, g)))
				if w.Code != http.StatusOK {
					t.Errorf("%s: status %d", what, w.Code)
					g.in.Done()
				}
			})
		}
		g.in.Wait()
		return g
	}
	full := func(round int, when string) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil)) // denied before its handler
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("round %d, %s: a request past the limit got status %d", round, when, w.Code)
		}
	}
	finish := func(g *gate) {
		close(g.out)
		g.done.Wait()
	}
	for round := range rounds {
		first := hold("first set")
		full(round, "the first set held")
		if err := l.Reset(context.Background(), "inflight", "global"); err != nil {
			t.Fatal(err)
		}
		second := hold("second set, after the Reset")
		full(round, "the second set held")
		finish(first)
		full(round, "the first set released after the Reset")
		clock.Advance(time.Minute) // the second set's slots expire
		third := hold("third set, the second's slots expired")
		full(round, "the third set held")
		finish(second)
		full(round, "the second set released after its slots expired")
		finish(third)
		if t.Failed() {
			return
		}
	}
}

// gateKey is the context key of the gate a held request waits on.
type gateKey struct{}
