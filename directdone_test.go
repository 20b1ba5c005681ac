package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// doneLog records what a script of misuses of Check's and Admit's
// admissions is told, for the direct path and the general path to be
// compared line by line.
type doneLog []string

func (g *doneLog) verdict(name string, v *ratelimit.Verdict) {
	res := v.Result()
	res.Slot = min(res.Slot, 1) // a token of the store's shard: see entryHandler.see
	*g = append(*g, fmt.Sprintf("%s: allowed %v %+v", name, v.Allowed(), res))
}

func (g *doneLog) addf(format string, args ...any) { *g = append(*g, fmt.Sprintf(format, args...)) }

// doneTwice calls done from two goroutines at once.
func doneTwice(a, b func()) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a() }()
	go func() { defer wg.Done(); b() }()
	wg.Wait()
}

// bothPaths runs script on a limiter of rule on the direct path and on the
// general path (generalPath), each with a clock of its own at the same
// time, and fails t unless both are told the same.
func bothPaths(t *testing.T, rule ratelimit.Rule, script func(l *ratelimit.Limiter, g *doneLog)) {
	t.Helper()
	var logs [2]doneLog
	for i, opt := range []func(ratelimit.Clock) ratelimit.Option{
		func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) },
		generalPath,
	} {
		clock := ratelimittest.NewClock(time.Unix(1_700_000_000, 0))
		script(ratelimit.NewRulesLimiter([]ratelimit.Rule{rule}, ratelimit.WithClock(clock), opt(clock)), &logs[i])
	}
	if !reflect.DeepEqual(logs[0], logs[1]) {
		for i := range max(len(logs[0]), len(logs[1])) {
			var a, b string
			if i < len(logs[0]) {
				a = logs[0][i]
			}
			if i < len(logs[1]) {
				b = logs[1][i]
			}
			if a != b {
				t.Errorf("step %d:\n direct  %s\n general %s", i, a, b)
			}
		}
	}
}

// TestCheckConcurrencyDoneGivesTheSlotBackOnce: a Concurrency rule's slot
// that Check admitted is given back by the first Done of the verdict or
// of any copy of it, called from two goroutines at once, or as
// DoneStatus; the other calls give back nothing (the key's other slot
// stays held). Done of a zero or denied verdict does nothing. Context of
// a limiter that settles nothing is its parent. The direct path is told
// what the general path is told, step by step.
func TestCheckConcurrencyDoneGivesTheSlotBackOnce(t *testing.T) {
	rule := ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 2, Period: time.Hour}, Key: ratelimit.ByIP()}
	bothPaths(t, rule, func(l *ratelimit.Limiter, g *doneLog) {
		r := clientReq(1)
		a, b := l.Check(r), l.Check(r)
		g.verdict("a", &a)
		g.verdict("b", &b)
		ctx := context.Background()
		g.addf("context of a non-settling limiter is its parent: %v", a.Context(ctx) == ctx)
		a2 := a
		doneTwice(a.Done, a2.Done)
		a.DoneStatus(http.StatusInternalServerError)
		c, d := l.Check(r), l.Check(r) // one slot came back: c only
		g.verdict("c after a's Done", &c)
		g.verdict("d, b and c holding", &d)
		d.Done() // denied: nothing to give back
		var zero ratelimit.Verdict
		zero.Done()
		zero.DoneStatus(http.StatusOK)
		e := l.Check(r)
		g.verdict("e after denied and zero Done", &e)
		doneTwice(b.Done, c.Done)
		b.Done()
		f, h, i := l.Check(r), l.Check(r), l.Check(r)
		g.verdict("f", &f)
		g.verdict("h", &h)
		g.verdict("i", &i)
		f.Done()
		h.Done()
	})
}

// TestCheckSettledDoneSettlesOnce: a settled rule's admission that Check
// made is settled by the first Done of the verdict or of a copy, called
// from two goroutines at once, with the last cost that Settle reported
// through any of the contexts Verdict.Context gave (the same parent twice,
// or two parents); after Done, Settle through those contexts, from another
// goroutine, and through a context asked for after Done, reports false and
// changes nothing, nor does a second Done or DoneStatus. An admission done
// before it was carried settles nothing. The direct path is told what the
// general path is told, step by step, the key's state included.
func TestCheckSettledDoneSettlesOnce(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			rule := ratelimit.Rule{Name: "tokens", Algorithm: alg, Settled: true,
				Limit: ratelimit.Limit{Rate: 40, Period: time.Minute}, Key: ratelimit.ByIP()}
			bothPaths(t, rule, func(l *ratelimit.Limiter, g *doneLog) {
				r := clientReq(1)
				ctx := context.Background()
				other := context.WithValue(ctx, struct{}{}, "other")
				v := l.Check(r)
				g.verdict("v", &v)
				c1 := v.Context(ctx)
				g.addf("context twice over its own is itself: %v", v.Context(c1) == c1)
				c2 := v.Context(other)
				g.addf("settle 9 through the first context: %v", ratelimit.Settle(c1, nil, 9))
				g.addf("settle 5 through the second: %v", ratelimit.Settle(c2, nil, 5))
				v2 := v
				doneTwice(v.Done, v2.Done)
				late := make(chan bool)
				go func() { late <- ratelimit.Settle(c1, nil, 30) }()
				g.addf("settle after Done from another goroutine: %v", <-late)
				g.addf("settle after Done through the second context: %v", ratelimit.Settle(c2, nil, 30))
				c3 := v.Context(ctx)
				g.addf("settle through a context asked for after Done: %v", ratelimit.Settle(c3, nil, 30))
				v.DoneStatus(http.StatusOK)
				v.Done()
				res, err := l.Peek(ctx, "tokens", "10.0.0.1")
				g.addf("after settling 5 for 1: %+v %v", res, err)

				u := l.Check(r)
				g.verdict("u", &u)
				u.Done()
				cu := u.Context(ctx)
				g.addf("settle 30 after Done before any Context: %v", ratelimit.Settle(cu, nil, 30))
				res, err = l.Peek(ctx, "tokens", "10.0.0.1")
				g.addf("after an admission done uncarried: %+v %v", res, err)
			})
		})
	}
}

// TestAdmitDoneGivesBackOnce: the done function of Admit, called twice
// and from two goroutines at once, gives a Concurrency slot back once, and
// on a settled rule keeps the estimate: the direct path is told what the
// general path is told.
func TestAdmitDoneGivesBackOnce(t *testing.T) {
	for _, rule := range []ratelimit.Rule{
		{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 2, Period: time.Hour}, Key: ratelimit.ByIP()},
		{Name: "tokens", Algorithm: ratelimit.GCRA, Settled: true, Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Key: ratelimit.ByIP()},
	} {
		t.Run(rule.Name, func(t *testing.T) {
			bothPaths(t, rule, func(l *ratelimit.Limiter, g *doneLog) {
				r := clientReq(1)
				admit := func(name string) func() {
					w := httptest.NewRecorder()
					done, ok := l.Admit(w, r)
					g.addf("%s: %v %d %v", name, ok, w.Code, w.Header())
					return done
				}
				a, b := admit("a"), admit("b")
				doneTwice(a, a)
				a()
				c, d := admit("c"), admit("d")
				doneTwice(b, c)
				d()
				e, f := admit("e"), admit("f")
				e()
				f()
			})
		})
	}
}

// TestServeRouteDenyCallbackGivesBackOnPanic: ServeRoute with a deny
// callback, whose admission Check makes, gives a Concurrency slot back when
// next panics, and a settled admission settles what next reported before
// it panicked; Settle after ServeRoute returned reports false. The direct
// path is told what the general path is told.
func TestServeRouteDenyCallbackGivesBackOnPanic(t *testing.T) {
	for _, rule := range []ratelimit.Rule{
		{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Period: time.Hour}, Key: ratelimit.ByIP()},
		{Name: "tokens", Algorithm: ratelimit.GCRA, Settled: true, Limit: ratelimit.Limit{Rate: 10, Period: time.Minute}, Key: ratelimit.ByIP()},
	} {
		t.Run(rule.Name, func(t *testing.T) {
			bothPaths(t, rule, func(l *ratelimit.Limiter, g *doneLog) {
				deny := func(v *ratelimit.Verdict) error { g.verdict("denied", v); return nil }
				var kept context.Context
				for i := range 3 {
					w := httptest.NewRecorder()
					func() {
						defer func() { g.addf("request %d panicked: %v", i, recover() != nil) }()
						served, err := l.ServeRoute(w, clientReq(1), "/", deny, func(error) error { return nil }, func(r *http.Request) error {
							kept = r.Context()
							g.addf("request %d settles: %v", i, ratelimit.Settle(kept, nil, 4))
							if i < 2 {
								panic("next failed")
							}
							return nil
						})
						g.addf("request %d: served %v %v", i, served, err)
					}()
					g.addf("request %d: %d %v; settle after: %v", i, w.Code, w.Header(), ratelimit.Settle(kept, nil, 7))
				}
				res, err := l.Peek(context.Background(), rule.Name, "10.0.0.1")
				g.addf("after: %+v %v", res, err)
			})
		})
	}
}

// TestCheckConcurrencyHotKeyDoneFromOtherGoroutines: a Concurrency key
// that Check takes again and again becomes hot in the in-process store
// (its queue taken without the shard's lock); the verdicts are done by
// other goroutines, all at once, while the next round's Checks run. Every
// slot comes back exactly once: each round admits exactly the rule's rate
// once the last round's verdicts are done, as on the general path.
func TestCheckConcurrencyHotKeyDoneFromOtherGoroutines(t *testing.T) {
	const rate = 4
	rule := ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: rate, Period: time.Hour}, Key: ratelimit.ByIP()}
	bothPaths(t, rule, func(l *ratelimit.Limiter, g *doneLog) {
		r := clientReq(1)
		var wg sync.WaitGroup
		for round := range 200 {
			wg.Wait() // the last round's verdicts are done
			admitted := 0
			var vs []ratelimit.Verdict
			for range rate + 1 {
				v := l.Check(r)
				if v.Allowed() {
					admitted++
					vs = append(vs, v)
				}
			}
			g.addf("round %d: %d admitted", round, admitted)
			for _, v := range vs {
				wg.Add(2)
				go func() { defer wg.Done(); v.Done() }()
				go func() { defer wg.Done(); v.Done() }()
			}
		}
		wg.Wait()
	})
}

// TestReloadKeepsOutstandingAdmissions: a Reloadable swaps in a new
// limiter of the same Concurrency rule on the same store while a Check
// verdict and an Admit of the old limiter hold its slots; the new limiter
// sees them held, and their Done, after the swap, gives them back through
// the old limiter, once. The direct path is told what the general path
// is told.
func TestReloadKeepsOutstandingAdmissions(t *testing.T) {
	rule := ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 2, Period: time.Hour}, Key: ratelimit.ByIP()}
	var logs [2]doneLog
	for i, wrap := range []func(ratelimit.Store) ratelimit.Store{
		func(s ratelimit.Store) ratelimit.Store { return s },
		func(s ratelimit.Store) ratelimit.Store { return struct{ ratelimit.Store }{s} }, // as generalPath
	} {
		g := &logs[i]
		clock := ratelimittest.NewClock(time.Unix(1_700_000_000, 0))
		st := wrap(memory.New(memory.WithClock(clock)))
		limiter := func() *ratelimit.Limiter {
			return ratelimit.NewRulesLimiter([]ratelimit.Rule{rule}, ratelimit.WithClock(clock), ratelimit.WithStore(st))
		}
		old := limiter()
		rl := ratelimit.NewReloadable(old)
		r := clientReq(1)
		admit := func(name string) func() {
			w := httptest.NewRecorder()
			done, ok := rl.Admit(w, r)
			g.addf("%s: %v %d %v", name, ok, w.Code, w.Header())
			return done
		}
		a := admit("a, old limiter")
		v := old.Check(r)
		g.verdict("v, old limiter", &v)
		rl.Store(limiter())
		admit("b, new limiter, both slots held")()
		doneTwice(a, v.Done)
		a()
		v.Done()
		c, d := admit("c, new limiter"), admit("d, new limiter")
		admit("e, new limiter, c and d holding")()
		c()
		d()
	}
	if !reflect.DeepEqual(logs[0], logs[1]) {
		t.Errorf("direct path told\n%q\ngeneral path told\n%q", logs[0], logs[1])
	}
	if want := "e, new limiter, c and d holding: false 429"; len(logs[0]) == 0 || !strings.HasPrefix(logs[0][len(logs[0])-1], want) {
		t.Errorf("last step %q, want %q...", logs[0][len(logs[0])-1], want)
	}
}

// TestCheckVerdictContextRacingDoneSettlesWhatItReports: Verdict.Context
// and a Settle through it on one goroutine race Done on another, request
// after request, on the direct path and the general path. Whichever wins,
// the settlement is charged exactly when Settle reported true: a Settle
// that lost to Done reports false and charges nothing, one that won is
// charged once. The key's count is the requests' estimates plus what the
// winning Settles added.
func TestCheckVerdictContextRacingDoneSettlesWhatItReports(t *testing.T) {
	const rate, n, actual = 1_000_000, 2000, 5
	for i, opt := range []func(ratelimit.Clock) ratelimit.Option{
		func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) },
		generalPath,
	} {
		clock := ratelimittest.NewClock(time.Unix(1_700_000_000, 0))
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "tokens", Algorithm: ratelimit.FixedWindow, Settled: true,
			Limit: ratelimit.Limit{Rate: rate, Period: 24 * time.Hour}, Key: ratelimit.ByIP()}}, ratelimit.WithClock(clock), opt(clock))
		r := clientReq(1)
		won := 0
		for range n {
			v := l.Check(r)
			if !v.Allowed() {
				t.Fatalf("path %d: %+v", i, v.Result())
			}
			start := make(chan struct{})
			settled := make(chan bool)
			go func() {
				<-start
				settled <- ratelimit.Settle(v.Context(context.Background()), nil, actual)
			}()
			var done sync.WaitGroup
			done.Go(func() { <-start; v.Done() })
			close(start)
			if <-settled {
				won++
			}
			done.Wait()
			v.Done() // after the racing one: nothing more
		}
		res, err := l.Peek(context.Background(), "tokens", "10.0.0.1")
		if want := rate - n - won*(actual-1); err != nil || res.Remaining != want {
			t.Errorf("path %d: Remaining %d (%v) after %d requests, %d of which settled %d in time; want %d",
				i, res.Remaining, err, n, won, actual, want)
		}
	}
}
