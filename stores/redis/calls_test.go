package redisstore

// Calls: a client that resends a command never applies a take or a return
// twice, and every call keeps its time budget whatever the client's
// options.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// TestRetriedCallAppliesOnce: go-redis with MaxRetries resends EVALSHA when
// a connection drops after the script ran (the proxy drops the reply).
// Every kind of call is applied once, and the caller gets the first run's
// reply, on a client with ContextTimeoutEnabled (calls on the caller's
// goroutine) and on one without (calls handed to a goroutine of their own).
func TestRetriedCallAppliesOnce(t *testing.T) {
	requireShared(t)
	cases := []struct {
		name string
		req  stores.Request
		call func(s *Store, req stores.Request) error
		want int // units in use afterwards: each case starts from 3 taken
	}{
		{"take/gcra", gcraReq("g", ratelimit.PerHour(10), 1), take, 4},
		{"take/fixed", withAlg(gcraReq("f", ratelimit.PerHour(10), 1), stores.FixedWindow), take, 4},
		{"take/concurrency", slotReq("c", 10, time.Hour, 1), take, 4},
		{"takeall/gcra", gcraReq("a", ratelimit.PerHour(10), 1), takeAll, 4},
		{"return/gcra", gcraReq("r", ratelimit.PerHour(10), 1), giveBack, 2},
		{"return/concurrency", slotReq("rc", 10, time.Hour, 1), giveBack, 2},
		{"take/sliding-log", withAlg(gcraReq("l", ratelimit.PerHour(10), 1), ratelimit.SlidingLog), take, 4},
		{"return/sliding-log", withAlg(gcraReq("rl", ratelimit.PerHour(10), 1), ratelimit.SlidingLog), giveBack, 2},
	}
	for _, ctxTimeout := range []bool{true, false} {
		for _, coalesce := range []bool{true, false} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("ctxtimeout=%v/coalescing=%v/%s", ctxTimeout, coalesce, c.name), func(t *testing.T) {
					retriedCallAppliesOnce(t, ctxTimeout, coalesce, c.req, c.call, c.want)
				})
			}
		}
	}
}

// retriedCallAppliesOnce is one case of TestRetriedCallAppliesOnce.
func retriedCallAppliesOnce(t *testing.T, ctxTimeout, coalesce bool, req stores.Request, call func(*Store, stores.Request) error, want int) {
	proxy := startProxy(t, sharedServer.Addr)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3, ContextTimeoutEnabled: ctxTimeout})
	t.Cleanup(func() { client.Close() })
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	prefix := uniquePrefix(t)
	opts := []Option{WithPrefix(prefix), WithClock(clock), WithoutDeniedCache()}
	if !coalesce {
		opts = append(opts, WithoutCoalescing())
	}
	s := newStore(client, opts...)
	direct := newStore(standaloneClient(t), WithPrefix(prefix), WithClock(clock))
	start := req
	start.Cost = 3
	mustTake(t, s, start) // also warms the connection and caches the script
	proxy.DropReplies(1)
	if err := call(s, req); err != nil {
		t.Fatalf("call whose reply was dropped: %v (the client should have retried)", err)
	}
	select {
	case <-proxy.dropped:
	default:
		t.Fatal("no reply was dropped")
	}
	if n := inUse(t, direct, req); n != want {
		t.Errorf("%d units in use, want %d: the retried call was applied %s", n, want, map[bool]string{true: "twice", false: "wrongly"}[n != want])
	}
}

func take(s *Store, req stores.Request) error {
	res, err := s.Take(context.Background(), req)
	if err == nil && !res.Allowed {
		err = fmt.Errorf("denied: %+v", res)
	}
	return err
}

func takeAll(s *Store, req stores.Request) error {
	out := make([]stores.Result, 1)
	err := s.TakeAll(context.Background(), []stores.Request{req}, out)
	if err == nil && !out[0].Allowed {
		err = fmt.Errorf("denied: %+v", out[0])
	}
	return err
}

func giveBack(s *Store, req stores.Request) error {
	return s.Return(context.Background(), req)
}

// TestBudgetWithoutContextTimeoutEnabled: with a client that does not bound
// socket reads by ctx (go-redis's default, which waits its ReadTimeout, 5s by default in go-redis v9.22),
// Take, TakeAll and Return on a server that never answers still return at
// the Store's budget, with an error wrapping context.DeadlineExceeded.
func TestBudgetWithoutContextTimeoutEnabled(t *testing.T) {
	addr := silentServer(t)
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
			t.Cleanup(func() { client.Close() })
			opts := []Option{WithTimeout(100 * time.Millisecond)}
			if !coalesce {
				opts = append(opts, WithoutCoalescing())
			}
			s := newStore(client, opts...)
			req := gcraReq("k", ratelimit.PerSecond(5), 1)
			for name, call := range map[string]func() error{
				"Take": func() error { _, err := s.Take(context.Background(), req); return err },
				"TakeAll": func() error {
					return s.TakeAll(context.Background(), []stores.Request{req}, make([]stores.Result, 1))
				},
				"Return": func() error { return s.Return(context.Background(), req) },
			} {
				start := time.Now()
				err := call()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s on a silent server: %v, want a deadline error", name, err)
				}
				// The budget is 100ms; the client alone would wait 5s.
				d := time.Since(start)
				t.Logf("%s on a silent server: %v", name, d)
				if d > 2*time.Second {
					t.Errorf("%s on a silent server took %v, want about the 100ms budget", name, d)
				}
			}
		})
	}
}

// TestDefaultBudget: a Store made with no options has DefaultTimeout, and
// a caller with no deadline of its own is bounded by it.
func TestDefaultBudget(t *testing.T) {
	addr := silentServer(t)
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { client.Close() })
	s := New(client)
	if s.timeout != DefaultTimeout {
		t.Fatalf("budget %v, want DefaultTimeout %v", s.timeout, DefaultTimeout)
	}
	start := time.Now()
	_, err := s.Take(context.Background(), gcraReq("k", ratelimit.PerSecond(5), 1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Take on a silent server: %v, want a deadline error", err)
	}
	d := time.Since(start)
	t.Logf("Take on a silent server with the default budget: %v", d)
	if d > 2*time.Second {
		t.Errorf("Take on a silent server took %v, want about DefaultTimeout", d)
	}
}

// TestPackageExampleSetupWhileRedisHangs: the production setup of the
// package example (a default client, New with its default budget, a
// Breaker, fail open), copied as written, never makes a request wait
// seconds while Redis hangs, and stops calling Redis once the breaker
// opens.
func TestPackageExampleSetupWhileRedisHangs(t *testing.T) {
	addr := silentServer(t)
	// As in Example (example_test.go), with the silent server's address.
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	store := breaker.New(New(client), breaker.Config{})
	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(), ratelimit.WithStore(store)) // fails open
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	var slowest time.Duration
	for range 20 {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		slowest = max(slowest, time.Since(start))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d with FailOpen", rec.Code)
		}
	}
	t.Logf("20 requests while Redis hangs: slowest %v, breaker %v", slowest, store.State())
	if slowest > time.Second {
		t.Errorf("slowest request %v while Redis hangs, want about DefaultTimeout (%v)", slowest, DefaultTimeout)
	}
	if st := store.State(); st != breaker.Open {
		t.Errorf("breaker %v after 20 failures, want open", st)
	}
}

// TestBudgetWithReadDeadlinesDisabled: a client with ContextTimeoutEnabled
// but ReadTimeout and WriteTimeout of -2 never sets a socket deadline (not
// even from ctx), so it cannot bound a read by the budget: Take on a server
// that never answers still returns at the Store's budget, as on a client
// without ContextTimeoutEnabled.
func TestBudgetWithReadDeadlinesDisabled(t *testing.T) {
	addr := silentServer(t)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, DisableIdentity: true,
		ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
	t.Cleanup(func() { client.Close() })
	s := newStore(client, WithTimeout(100*time.Millisecond), WithoutCoalescing())
	done := make(chan error, 1)
	go func() {
		_, err := s.Take(context.Background(), gcraReq("k", ratelimit.PerSecond(5), 1))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Take on a silent server: %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second): // the budget is 100ms; without it the read never ends
		t.Fatal("Take on a silent server with socket deadlines disabled did not return")
	}
}
