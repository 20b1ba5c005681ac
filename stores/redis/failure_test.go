package redisstore

// Fault tests through the real middleware: ratelimit.New with this Store
// behind a Breaker, a 50ms WithTimeout budget and each failure policy,
// against a real redis-server that is killed, hung, slowed, restarted,
// full, or reached through an exhausted pool. Real time is used only to
// bound latencies; the margins are generous for a loaded 2-core machine.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// The budget is the middleware's WithTimeout. It must exceed a healthy
// round trip on a loaded 2-core machine under -race, where Redis itself
// waits for a CPU: at 50ms, calls before a fault and recovery probes timed
// out, so the policy answered where the tests expected Redis, and a probe
// that Redis ran after its caller gave up consumed one more unit.
const (
	faultBudget = 500 * time.Millisecond
	faultMargin = time.Second     // scheduling slack on a loaded machine
	faultSlow   = 3 * faultBudget // a reply delay well past the budget
)

// faultClient returns a client as recommended for production: the ctx
// deadline bounds reads and writes, no retries (the budget is the
// middleware's), and a short dial timeout.
func faultClient(addr string, mod ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{
		Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, DialerRetries: 1,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		Protocol: 2, DisableIdentity: true,
	}
	for _, f := range mod {
		f(o)
	}
	return redis.NewClient(o)
}

type policyCase struct {
	name   string
	policy func() ratelimit.FailurePolicy // a fresh fallback store each time
}

var faultPolicies = []policyCase{
	{"fail-open", func() ratelimit.FailurePolicy { return ratelimit.FailurePolicy{} }},
	{"fail-closed-503", func() ratelimit.FailurePolicy { return ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable} }},
	{"fail-closed-429", func() ratelimit.FailurePolicy { return ratelimit.FailurePolicy{Status: http.StatusTooManyRequests} }},
	{"fallback", func() ratelimit.FailurePolicy { return ratelimit.FailurePolicy{Fallback: memory.New()} }},
}

// rig is a handler limited through a Breaker on a Store.
type rig struct {
	t       *testing.T
	h       http.Handler
	br      *breaker.Breaker
	policy  string
	budget  time.Duration // the middleware's WithTimeout
	store   *Store
	opened  atomic.Int32
	closed  atomic.Int32
	slowest atomic.Int64
}

func newRig(t *testing.T, client redis.UniversalClient, policy policyCase, limit stores.Limit, opts ...Option) *rig {
	return newRigBudget(t, client, policy, limit, faultBudget, opts...)
}

// newRigBudget is newRig with another budget than faultBudget.
func newRigBudget(t *testing.T, client redis.UniversalClient, policy policyCase, limit stores.Limit, budget time.Duration, opts ...Option) *rig {
	r := &rig{t: t, policy: policy.name, budget: budget}
	r.store = newStore(client, append([]Option{WithPrefix(uniquePrefix(t))}, opts...)...)
	r.br = breaker.New(r.store, breaker.Config{
		Failures: 3, Cooldown: 50 * time.Millisecond, MaxCooldown: 200 * time.Millisecond,
		OnStateChange: func(from, to breaker.State) {
			switch to {
			case breaker.Open:
				r.opened.Add(1)
			case breaker.Closed:
				r.closed.Add(1)
			}
		},
	})
	mw := ratelimit.NewRules([]ratelimit.Rule{{Limit: limit, Key: ratelimit.ByIP(), OnStoreError: policy.policy()}}, ratelimit.WithStore(r.br), ratelimit.WithTimeout(budget))
	r.h = mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	return r
}

// reply is what one request got.
type reply struct {
	status    int
	fields    bool // RateLimit fields were written: a store (Redis or fallback) decided
	remaining int
	took      time.Duration
}

// serve sends one request from ip and checks that it completed within the
// budget plus the margin.
func (r *rig) serve(ip string) reply {
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = ip + ":1234"
	rec := httptest.NewRecorder()
	start := time.Now()
	r.h.ServeHTTP(rec, req)
	d := time.Since(start)
	if d > r.budget+faultMargin {
		r.t.Errorf("%s: a request took %v, beyond the %v budget and %v margin", r.policy, d, r.budget, faultMargin)
	}
	for p := r.slowest.Load(); int64(d) > p && !r.slowest.CompareAndSwap(p, int64(d)); p = r.slowest.Load() {
	}
	rep := reply{status: rec.Code, took: d, remaining: -1}
	if v := rec.Header().Get("RateLimit"); v != "" {
		rep.fields = true
		if i := strings.Index(v, ";r="); i >= 0 {
			rest := v[i+3:]
			if j := strings.IndexByte(rest, ';'); j >= 0 {
				rest = rest[:j]
			}
			rep.remaining, _ = strconv.Atoi(rest)
		}
	}
	return rep
}

// failed reports whether rep is the policy's answer to a store failure.
func (r *rig) failed(rep reply) bool {
	switch r.policy {
	case "fail-open":
		return rep.status == 200 && !rep.fields
	case "fail-closed-503":
		return rep.status == 503 && !rep.fields
	case "fail-closed-429":
		return rep.status == 429 && !rep.fields
	}
	return rep.fields && (rep.status == 200 || rep.status == 429) // the fallback decided
}

// normal reports whether rep is a decision of the Redis store (or, for the
// fallback policy, of either store).
func normal(rep reply) bool { return rep.fields && (rep.status == 200 || rep.status == 429) }

// recover sends a request every 20ms until the breaker is closed and Redis
// decides again, and returns that reply.
func (r *rig) recover(ip string) reply {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep := r.serve(ip)
		if r.br.State() == breaker.Closed && normal(rep) && (r.opened.Load() == 0 || r.closed.Load() > 0) {
			return rep
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: no recovery within 10s: breaker %v, last reply %+v", r.policy, r.br.State(), rep)
		}
		time.Sleep(20 * time.Millisecond) // polling for the breaker's probe
	}
}

// load runs workers that send requests until stop is closed, and returns
// a function that waits for them and returns every reply.
func (r *rig) load(workers int, stop <-chan struct{}) func() []reply {
	var mu sync.Mutex
	var all []reply
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ip := fmt.Sprintf("192.0.2.%d", 10+w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep := r.serve(ip)
				mu.Lock()
				all = append(all, rep)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	return func() []reply { wg.Wait(); return all }
}

// TestFaultServerKilled (a): Redis is killed while requests are running.
// Every request completes within the budget; once the store fails, each
// gets the policy's answer; the breaker opens; after Redis is restarted it
// closes by itself and Redis decides again.
func TestFaultServerKilled(t *testing.T) {
	for _, p := range faultPolicies {
		t.Run(p.name, func(t *testing.T) {
			srv := startTestRedis(t)
			baseline := runtime.NumGoroutine()
			client := faultClient(srv.Addr)
			r := newRig(t, client, p, ratelimit.PerMinute(1000))
			if rep := r.serve("192.0.2.1"); !normal(rep) || rep.status != 200 {
				t.Fatalf("before the kill: %+v", rep)
			}
			stop := make(chan struct{})
			wait := r.load(8, stop)
			time.Sleep(100 * time.Millisecond) // let the load run against Redis
			srv.Stop()
			killed := time.Now()
			for r.opened.Load() == 0 && time.Since(killed) < 5*time.Second {
				time.Sleep(5 * time.Millisecond) // polling for the breaker to open
			}
			time.Sleep(100 * time.Millisecond) // load while the breaker is open
			close(stop)
			all := wait()
			if r.opened.Load() == 0 {
				t.Fatal("the breaker never opened")
			}
			failures := 0
			for _, rep := range all {
				switch {
				case r.failed(rep):
					failures++
				case !normal(rep):
					t.Fatalf("reply %+v is neither a decision nor the %s answer", rep, p.name)
				}
			}
			if failures == 0 {
				t.Fatal("no request got the policy's answer")
			}
			// The policy's answer, within the budget and margin that serve
			// checks. Not "faster than the budget": the server is dead, so a
			// probe let through after the cooldown is refused as fast, and on
			// a loaded machine either can take longer than 50ms.
			if rep := r.serve("192.0.2.1"); !r.failed(rep) {
				t.Errorf("with the breaker open: %+v, want the %s answer", rep, p.name)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			if rep := r.recover("192.0.2.1"); rep.status != 200 {
				t.Errorf("after recovery: %+v", rep)
			}
			t.Logf("%d requests, %d failed over, slowest %v", len(all), failures, time.Duration(r.slowest.Load()))
			client.Close()
			waitGoroutines(t, baseline)
		})
	}
}

// TestFaultSilentServer (b): a server that accepts TCP and never answers
// costs each request its budget, then nothing once the breaker opens; the
// fallback applies its own limit; when the server answers again the
// breaker closes by itself.
func TestFaultSilentServer(t *testing.T) {
	requireShared(t)
	for _, p := range faultPolicies {
		t.Run(p.name, func(t *testing.T) {
			baseline := runtime.NumGoroutine()
			proxy := startProxy(t, sharedServer.Addr)
			client := faultClient(proxy.Addr())
			r := newRig(t, client, p, ratelimit.PerHour(5)) // per hour: no refill while the test waits
			if rep := r.serve("192.0.2.1"); !normal(rep) || rep.remaining != 4 {
				t.Fatalf("before the hang: %+v", rep)
			}
			proxy.SetSilent(true)
			var reps []reply
			for range 8 {
				reps = append(reps, r.serve("192.0.2.2"))
			}
			for i, rep := range reps {
				if !r.failed(rep) {
					t.Errorf("request %d on a silent server: %+v, want the %s answer", i, rep, p.name)
				}
			}
			if r.br.State() != breaker.Open {
				t.Errorf("breaker %v after 8 timeouts, want open", r.br.State())
			}
			if p.name == "fallback" {
				// The fallback store applies the rule's limit locally: 5 per hour.
				for i, rep := range reps {
					if wantOK := i < 5; (rep.status == 200) != wantOK {
						t.Errorf("fallback request %d: %+v, want allowed %v", i, rep, wantOK)
					}
				}
			}
			proxy.SetSilent(false)
			// 1 before and this one; a probe that timed out after Redis
			// ran it may have consumed one more. Fresh state would leave 4.
			if rep := r.recover("192.0.2.1"); rep.status != 200 || rep.remaining > 3 || rep.remaining < 2 {
				t.Errorf("after recovery: %+v, want Redis's state kept (3, or 2, remaining)", rep)
			}
			client.Close()
			proxy.Close()
			waitGoroutines(t, baseline)
		})
	}
}

// TestFaultSlowServer (c): replies delayed past the budget: each request
// is bounded by the budget, the policy applies, the breaker opens; when
// replies are fast again it closes, and the limit goes on from the state
// Redis kept (the slow calls' consumption stands: Redis ran them).
func TestFaultSlowServer(t *testing.T) {
	requireShared(t)
	for _, p := range faultPolicies[:2] {
		t.Run(p.name, func(t *testing.T) {
			baseline := runtime.NumGoroutine()
			proxy := startProxy(t, sharedServer.Addr)
			client := faultClient(proxy.Addr())
			r := newRig(t, client, p, ratelimit.PerHour(100)) // per hour: no refill while the test waits
			if rep := r.serve("192.0.2.1"); !normal(rep) || rep.remaining != 99 {
				t.Fatalf("before: %+v", rep)
			}
			proxy.SetDelay(faultSlow)
			for i := range 5 {
				if rep := r.serve("192.0.2.1"); !r.failed(rep) {
					t.Errorf("slow request %d: %+v, want the %s answer", i, rep, p.name)
				}
			}
			if r.opened.Load() == 0 {
				t.Error("the breaker did not open")
			}
			proxy.SetDelay(0)
			rep := r.recover("192.0.2.1")
			// 1 before and this one, and whatever the timed-out calls and
			// the probes consumed when they reached Redis: the state is kept.
			if rep.remaining > 98 || rep.remaining < 90 {
				t.Errorf("after recovery: %+v, want Redis's state kept (at most 98 remaining)", rep)
			}
			t.Logf("after recovery: %d remaining", rep.remaining)
			client.Close()
			proxy.Close()
			waitGoroutines(t, baseline)
		})
	}
}

// TestFaultRestartScriptFlush (d): SCRIPT FLUSH, then a restart (which
// empties the script cache too) with persistence on: calls reload the
// script transparently, and the limit resumes with the state Redis kept.
func TestFaultRestartScriptFlush(t *testing.T) {
	requireRedis(t)
	srv, err := startRedis(t.TempDir(), false, "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	p := faultPolicies[3] // fallback
	baseline := runtime.NumGoroutine()
	client := faultClient(srv.Addr)
	r := newRig(t, client, p, ratelimit.PerHour(10)) // per hour: no refill while the test waits
	for i := range 3 {
		if rep := r.serve("192.0.2.1"); rep.remaining != 9-i {
			t.Fatalf("request %d: %+v", i, rep)
		}
	}
	if err := client.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if rep := r.serve("192.0.2.1"); rep.status != 200 || rep.remaining != 6 {
		t.Fatalf("after SCRIPT FLUSH: %+v, want 6 remaining", rep)
	}
	srv.Stop()
	for range 5 {
		if rep := r.serve("192.0.2.1"); !r.failed(rep) {
			t.Errorf("Redis down: %+v, want the fallback's decision", rep)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The 5 requests of the outage went to the fallback, not Redis.
	if rep := r.recover("192.0.2.1"); rep.remaining != 5 {
		t.Errorf("after the restart: %+v, want 5 remaining (state kept by the AOF)", rep)
	}
	client.Close()
	waitGoroutines(t, baseline)
}

// TestFaultOutOfMemory (e): Redis at maxmemory with noeviction refuses
// writes: an allowed check cannot be recorded, so the store reports an
// error (never a denial) and the policy applies; after memory is freed the
// limit resumes from the state Redis kept.
func TestFaultOutOfMemory(t *testing.T) {
	for _, p := range []policyCase{faultPolicies[0], faultPolicies[1]} {
		t.Run(p.name, func(t *testing.T) {
			srv := startTestRedis(t)
			baseline := runtime.NumGoroutine()
			ctx := context.Background()
			client := faultClient(srv.Addr)
			r := newRig(t, client, p, ratelimit.PerHour(10)) // per hour: no refill while the test waits
			for i := range 2 {
				if rep := r.serve("192.0.2.1"); rep.remaining != 9-i {
					t.Fatalf("request %d: %+v", i, rep)
				}
			}
			// Fill, then cap memory below what is used.
			for i := range 8 {
				client.Set(ctx, fmt.Sprintf("filler:%d", i), strings.Repeat("x", 256<<10), time.Minute)
			}
			used, err := client.Info(ctx, "memory").Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := client.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
			if err := client.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
				t.Fatal(err)
			}
			if err := client.Set(ctx, "probe", "x", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("a write at maxmemory: %v (memory: %.60q)", err, used)
			}
			for i := range 5 {
				rep := r.serve("192.0.2.1")
				if !r.failed(rep) {
					t.Errorf("request %d at maxmemory: %+v, want the %s answer", i, rep, p.name)
				}
			}
			// The store itself: an error, never a denial.
			res, err := r.store.Take(ctx, gcraReq("direct", ratelimit.PerMinute(10), 1))
			if err == nil || res.Allowed || !strings.Contains(err.Error(), "OOM") || !strings.HasPrefix(err.Error(), "ratelimit: redis: ") {
				t.Errorf("Take at maxmemory = %+v, %v; want a ratelimit: redis: OOM error", res, err)
			}
			if err := client.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if rep := r.recover("192.0.2.1"); rep.remaining > 7 || rep.remaining < 6 {
				// 2 before; the breaker's probes after the fix may add one.
				t.Errorf("after memory was freed: %+v, want 7 (or 6) remaining", rep)
			}
			client.Close()
			waitGoroutines(t, baseline)
		})
	}
}

// TestFaultPoolExhausted (f): one warm pooled connection, a 20ms pool
// timeout, and many concurrent requests. With coalescing (the default)
// they share the connection and all succeed; without it, requests that
// cannot get the connection within the pool timeout get the policy's
// answer. The budget is generous (the subject is the pool, not the
// budget, and on a loaded machine queued requests may wait past 50ms).
// A cold connection is another matter: its dial, handshake and script
// load come before the first batch.
func TestFaultPoolExhausted(t *testing.T) {
	requireShared(t)
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
			baseline := runtime.NumGoroutine()
			proxy := startProxy(t, sharedServer.Addr)
			proxy.SetDelay(10 * time.Millisecond) // each round trip holds the connection
			client := faultClient(proxy.Addr(), func(o *redis.Options) {
				o.PoolSize, o.PoolTimeout, o.MinIdleConns = 1, 20*time.Millisecond, 0
			})
			var opts []Option
			if !coalesce {
				opts = append(opts, WithoutCoalescing())
			}
			p := faultPolicies[1] // fail-closed 503
			r := newRigBudget(t, client, p, ratelimit.PerMinute(10_000), time.Second, opts...)
			// Warm the one connection and cache the script, as in a running
			// service: the claim is about sharing a warm connection.
			warm, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := r.store.Take(warm, gcraReq("warm", ratelimit.PerMinute(10), 0)); err != nil {
				t.Fatal(err)
			}
			cancel()
			var wg sync.WaitGroup
			var ok, failed atomic.Int64
			for w := range 48 {
				wg.Go(func() {
					for range 3 {
						rep := r.serve(fmt.Sprintf("192.0.2.%d", w))
						switch {
						case normal(rep):
							ok.Add(1)
						case r.failed(rep):
							failed.Add(1)
						default:
							t.Errorf("reply %+v", rep)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%d decided by Redis, %d failed closed, slowest %v, %+v", ok.Load(), failed.Load(), time.Duration(r.slowest.Load()), r.store.Stats())
			if coalesce && failed.Load() > 0 {
				t.Errorf("with coalescing, %d requests failed on a pool of one", failed.Load())
			}
			if !coalesce && failed.Load() == 0 {
				t.Errorf("without coalescing, no request failed on a pool of one")
			}
			proxy.SetDelay(0)
			r.recover("192.0.2.250")
			client.Close()
			proxy.Close()
			waitGoroutines(t, baseline)
		})
	}
}
