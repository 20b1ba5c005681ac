package bench

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// RedisServer is a redis-server started for the benchmarks on a free
// loopback port, without persistence, in a temporary directory, by the
// Redis module's launcher (package redistest).
type RedisServer struct {
	*redistest.Server
}

// StartRedis starts a private redis-server on 127.0.0.1 and waits until it
// answers PING. Stop it with Stop.
func StartRedis() (*RedisServer, error) {
	s, err := redistest.StartServer(redistest.Config{Args: []string{"--maxclients", "1000"}})
	if err != nil {
		return nil, err
	}
	return &RedisServer{s}, nil
}

// Stop kills the server and removes its directory.
func (s *RedisServer) Stop() { s.Close() }

// Client returns a new client of the server with a pool of poolSize
// connections and a round-trip counter.
func (s *RedisServer) Client(poolSize int) (*redis.Client, *RoundTrips) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: poolSize, MinIdleConns: poolSize})
	rt := &RoundTrips{}
	c.AddHook(rt)
	return c, rt
}

// RoundTrips is a go-redis hook that counts round trips to the server: one
// per command sent alone, one per pipeline or transaction.
type RoundTrips struct{ n atomic.Int64 }

// Load returns the round trips counted so far.
func (rt *RoundTrips) Load() int64 { return rt.n.Load() }

// DialHook implements redis.Hook.
func (rt *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (rt *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connInit(cmd) {
			rt.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (rt *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if !connInit(c) {
				rt.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// connInit reports whether cmd is one go-redis sends when it opens a
// connection (HELLO, CLIENT SETINFO, ...): the pool's cost, not a check's.
func connInit(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping":
		return true
	}
	return false
}

// CommandCalls returns the number of commands the server executed, by
// command, from INFO commandstats (the INFO calls themselves excluded by the
// caller's deltas).
func CommandCalls(ctx context.Context, c redis.UniversalClient) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls, nil
}

// ServerCPU returns the CPU time the server has used (user + system), from
// INFO cpu.
func ServerCPU(ctx context.Context, c redis.UniversalClient) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", f, err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), nil
}

// ExpiredKeys returns how many keys the server has expired since it started.
func ExpiredKeys(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "expired_keys"), 10, 64)
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
