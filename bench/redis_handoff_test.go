package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisHandOff measures what handing a command to another goroutine
// costs, the way the Redis store keeps its budget on a go-redis client
// without ContextTimeoutEnabled: one PING per call through go-redis, at 1
// and 4 calls in flight, sent
//
//   - direct: on the caller's goroutine, by a ContextTimeoutEnabled client
//     (socket reads bounded by the caller's ctx);
//   - goroutine: on a goroutine started per call, the caller waiting for
//     its reply or its budget (the store's way on the default client);
//   - worker: by a long-lived goroutine per client that receives calls on
//     a channel, the caller waiting the same way.
//
// It reports µs per call, p50 and p99, redis-server's CPU per call and the
// process's allocations per call. It is a measurement, not a check: it
// runs only with RATELIMIT_REDIS_HANDOFF set (to the seconds per row):
//
//	RATELIMIT_REDIS_HANDOFF=1 go test -run TestRedisHandOff -cpu 2 -count 3 -v ./bench/
func TestRedisHandOff(t *testing.T) {
	secs := os.Getenv("RATELIMIT_REDIS_HANDOFF")
	if secs == "" {
		t.Skip("a measurement: set RATELIMIT_REDIS_HANDOFF to run it")
	}
	d, err := time.ParseDuration(secs + "s")
	if err != nil {
		t.Fatalf("RATELIMIT_REDIS_HANDOFF=%q: %v", secs, err)
	}
	srv := startRedis(t)
	t.Logf("| in flight | sent | µs/call | p50 | p99 | server CPU/call | allocs/call |")
	for _, workers := range []int{1, 4} {
		for _, mode := range []string{"direct", "goroutine", "worker"} {
			r, err := runHandOff(srv, mode, workers, d)
			if err != nil {
				t.Fatal(err)
			}
			if r.Errors != 0 {
				t.Errorf("%s/%d: %d errors", mode, workers, r.Errors)
			}
			t.Logf("| %d | %s | %.1f | %v | %v | %.1f µs | %.1f |", workers, mode,
				float64(r.Elapsed.Microseconds())/float64(max(r.Checks, 1)),
				r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond),
				float64(r.ServerCPUPerCheck().Nanoseconds())/1000, r.AllocsPerCheck())
		}
	}
}

// runHandOff measures PINGs sent as mode says (see TestRedisHandOff).
func runHandOff(srv *RedisServer, mode string, workers int, d time.Duration) (RedisResult, error) {
	ctx := context.Background()
	client, rt := srv.Client(workers)
	defer client.Close()
	o := *client.Options()
	o.ContextTimeoutEnabled = mode == "direct"
	sender := redis.NewClient(&o)
	defer sender.Close()
	var send func(context.Context) error
	switch mode {
	case "direct":
		send = func(ctx context.Context) error { return sender.Ping(ctx).Err() }
	case "goroutine":
		send = func(ctx context.Context) error {
			done := make(chan error, 1)
			go func() { done <- sender.Ping(ctx).Err() }()
			return await(ctx, done)
		}
	case "worker":
		type call struct {
			ctx  context.Context
			done chan error
		}
		calls := make(chan call)
		defer close(calls)
		for range workers {
			go func() {
				for c := range calls {
					c.done <- sender.Ping(c.ctx).Err()
				}
			}()
		}
		send = func(ctx context.Context) error {
			done := make(chan error, 1)
			calls <- call{ctx, done}
			return await(ctx, done)
		}
	default:
		return RedisResult{}, fmt.Errorf("unknown mode %q", mode)
	}
	check := func(ctx context.Context, _ string) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, benchBudget)
		defer cancel()
		return true, send(ctx)
	}
	if err := forEach(make([]string, workers), workers, func(string) error {
		_, err := check(ctx, "") // opens the whole pool
		return err
	}); err != nil {
		return RedisResult{}, err
	}
	res, err := measureChecks(ctx, client, rt, check, []string{""}, Case{Keys: 1}, workers, d)
	res.Library = mode
	return res, err
}

// await returns the error sent on done, or ctx's error if it ends first.
func await(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
