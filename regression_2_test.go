package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Race: multi-rule Admit with done() run after the batch went back to the pool.
func TestRegressionRaceAdmitDone(t *testing.T) {
	other := memory.New()
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "c", Limit: ratelimit.Limit{Rate: 4, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global()},
		{Name: "c2", Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Algorithm: ratelimit.Concurrency, Key: ratelimit.Global(), Store: other},
		{Name: "g", Limit: ratelimit.PerSecond(1000000), Key: ratelimit.ByIP()},
		{Name: "s", Limit: ratelimit.PerSecond(5), Key: ratelimit.ByIP(), Shadow: true},
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var dones []func()
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			done, ok := l.Admit(rec, ratelimittest.NewRequest("GET", "/", fmt.Sprintf("10.0.0.%d:1", i%250)))
			if ok {
				mu.Lock()
				dones = append(dones, done)
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, d := range dones {
		d()
	}
	t.Logf("held at once: %d", len(dones))
	if len(dones) > 3 {
		t.Errorf("concurrency cap exceeded: %d", len(dones))
	}
	// Everything released: the cap is available again.
	done, ok := l.Admit(httptest.NewRecorder(), ratelimittest.NewRequest("GET", "/", ""))
	if !ok {
		t.Error("slots not released")
	}
	done()
}

// Breaker under concurrency with a flapping store.
func TestRegressionRaceBreaker(t *testing.T) {
	st := &toggle{Store: memory.New()}
	var changes []string
	var mu sync.Mutex
	br := breaker.New(st, breaker.Config{Failures: 2, Cooldown: time.Millisecond, MaxCooldown: 4 * time.Millisecond,
		OnStateChange: func(a, b breaker.State) {
			mu.Lock()
			changes = append(changes, a.String()+">"+b.String())
			mu.Unlock()
		}})
	var wg sync.WaitGroup
	stop := time.Now().Add(200 * time.Millisecond)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if rand.IntN(10) == 0 {
					st.down.Store(!st.down.Load())
				}
				br.Take(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1e6), Cost: 1})
				br.Return(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1e6), Cost: 1})
			}
		}()
	}
	wg.Wait()
	st.down.Store(false)
	time.Sleep(10 * time.Millisecond)
	for i := 0; i < 3; i++ {
		br.Take(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1e6), Cost: 1})
	}
	t.Logf("transitions: %d, final %v", len(changes), br.State())
	if br.State() != breaker.Closed {
		t.Error("breaker did not recover")
	}
}

// Extreme limits: no negative or absurd values.
func TestRegressionExtremeLimits(t *testing.T) {
	const maxC = 1<<31 - 1
	fifty := 50 * 365 * 24 * time.Hour
	limits := []ratelimit.Limit{
		{Rate: maxC, Period: fifty, Burst: maxC},
		{Rate: maxC, Period: fifty},
		{Rate: 1, Period: fifty, Burst: 2},
		{Rate: maxC, Period: time.Duration(maxC)},
		{Rate: 3, Period: fifty},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, lim := range limits {
		if err := lim.Validate(); err != nil {
			t.Logf("%v rejected: %v", lim, err)
			continue
		}
		for alg := ratelimit.GCRA; alg <= ratelimit.Concurrency; alg++ {
			l := lim
			if alg != ratelimit.GCRA {
				l.Burst = 0
			}
			s := memory.New()
			for _, c := range []int{l.Capacity(), 1, l.Capacity(), 0, 1} {
				at := now.Add(time.Duration(rand.Int64N(int64(time.Hour))))
				res, err := s.TakeAt(at, ratelimit.Request{Key: "k", Limit: l, Algorithm: alg, Cost: c})
				if err != nil {
					t.Fatalf("%v %v: %v", l, alg, err)
				}
				if res.Remaining < 0 || res.RetryAfter < 0 || res.ResetAfter < 0 || res.Remaining > l.Capacity() ||
					res.ResetAfter > time.Duration(1<<62) || res.RetryAfter > time.Duration(1<<62) {
					t.Errorf("%v %v cost %d: %+v", l, alg, c, res)
				}
				if err := s.ReturnAt(at, ratelimit.Request{Key: "k", Limit: l, Algorithm: alg, Cost: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Headers for such a limit.
	h := ratelimit.New(ratelimit.Limit{Rate: maxC, Period: fifty, Burst: maxC}, ratelimit.ByIP(), ratelimit.WithHeaders(ratelimit.HeadersIETF|ratelimit.HeadersLegacy))(http.NotFoundHandler())
	r := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("%v", r.Header)
}
