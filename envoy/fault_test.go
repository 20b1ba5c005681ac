package envoy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit/breaker"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// Redis killed, then restarted on the same port, then its script cache
// flushed: while it is down every call is answered within the store's
// budget (500ms here) with the configured policy (here OVER_LIMIT), never a gRPC error
// and never a hang; once it is back calls are decided by Redis again.
func TestRedisKilledRestartedAndFlushedKeepsThePolicyAndBoundedLatency(t *testing.T) {
	srv, rc := startRedisServer(t)
	store := breaker.New(redisstore.New(rc, redisstore.WithTimeout(500*time.Millisecond)), breaker.Config{Failures: 3, Cooldown: 50 * time.Millisecond})
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), store, WithFailurePolicy(FailClosed()))
	if err != nil {
		t.Fatal(err)
	}
	client := serveGRPC(t, svc)
	ctx := context.Background()
	call := func() (*pb.RateLimitResponse, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.ShouldRateLimit(ctx, request("api", [][]string{{"client", "a"}, {"path", "/x"}}, 1))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v (a store failure must be answered by the policy)", err)
		}
		return resp, time.Since(start)
	}
	if resp, _ := call(); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 9 {
		t.Fatalf("before the fault: %v", resp)
	}

	srv.Stop()
	for i := range 20 {
		resp, took := call()
		if resp.OverallCode != over || resp.Statuses[0].LimitRemaining != 0 {
			t.Fatalf("call %d with Redis down: %v, want OVER_LIMIT by the fail-closed policy", i, resp)
		}
		// The budget is 500ms (roomy for a loaded machine); the call must
		// never wait out a connect or read timeout of its own (seconds).
		if took > 2*time.Second {
			t.Fatalf("call %d with Redis down took %v", i, took)
		}
	}
	if s := svc.Stats(); s.StoreErrors < 40 {
		t.Fatalf("stats %+v: every descriptor of the 20 calls must have failed", s)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var resp *pb.RateLimitResponse
	deadline := time.Now().Add(20 * time.Second)
	for resp, _ = call(); resp.OverallCode != ok; resp, _ = call() {
		if time.Now().After(deadline) { // the breaker probes every 50ms-1.6s
			t.Fatalf("Redis back for 20s and still %v", resp)
		}
	}
	// The restarted Redis kept nothing: the count started again (a call
	// that found one descriptor back and the other still failing charged
	// the first, as every descriptor is charged whatever the others say).
	before := resp.Statuses[0].LimitRemaining
	if before < 7 || before > 9 {
		t.Fatalf("after the restart: %v", resp)
	}
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := call(); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != before-1 {
		t.Fatalf("after SCRIPT FLUSH: %v, want the call decided by Redis (%d remaining)", resp, before-1)
	}
}

// A Redis that stops answering for a while (DEBUG SLEEP holds its only
// thread) costs each call no more than the store's budget (500ms here): the policy
// answers, and Redis decides again once it wakes.
func TestSlowRedisIsCutAtTheBudgetAndThePolicyAnswers(t *testing.T) {
	_, rc := startRedisServer(t)
	store := redisstore.New(rc, redisstore.WithTimeout(500*time.Millisecond))
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), store, WithFailurePolicy(FailClosed()))
	if err != nil {
		t.Fatal(err)
	}
	client := serveGRPC(t, svc)
	ctx := context.Background()
	req := request("api", [][]string{{"client", "a"}}, 1)
	if resp, err := client.ShouldRateLimit(ctx, req); err != nil || resp.OverallCode != ok {
		t.Fatalf("before: %v %v", resp, err)
	}
	slept := make(chan error, 1)
	other := rc.Options()
	go func() {
		c := newRawClient(other.Addr)
		defer c.Close()
		slept <- c.Do(ctx, "DEBUG", "SLEEP", "3").Err()
	}()
	// Wait until Redis is asleep: a PING on its own connection stalls.
	probe := newRawClient(other.Addr)
	defer probe.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := probe.Ping(pctx).Err()
		cancel()
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			break
		}
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
	}
	start := time.Now()
	resp, err := client.ShouldRateLimit(ctx, req)
	took := time.Since(start)
	if err != nil || resp.OverallCode != over {
		t.Fatalf("with Redis asleep: %v %v, want OVER_LIMIT by the fail-closed policy", resp, err)
	}
	if took > 2*time.Second {
		t.Fatalf("with Redis asleep for 3s the call took %v: the 500ms budget was not kept", took)
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if resp, err := client.ShouldRateLimit(ctx, req); err != nil || resp.OverallCode != ok {
		t.Fatalf("after Redis woke: %v %v", resp, err)
	}
}
