package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicehq/ratelimit"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// RedisUnlimited is the limit of the Redis allow path: 10^6 per second, which
// never denies at the rates one Redis serves, and whose interval (1µs) every
// library's arithmetic represents, so that each check writes its state.
var RedisUnlimited = Limit{N: 1_000_000, Per: time.Second}

// RedisLibrary is a limiter with a Redis store, checked through its limiter
// API (redis_rate has no HTTP middleware; the HTTP layer is measured on
// memory).
type RedisLibrary struct {
	Name, Module, Algorithm, Notes string
	// New returns a check of one event for key under l on client.
	New func(client redis.UniversalClient, l Limit) (check func(ctx context.Context, key string) (bool, error), err error)
}

// benchBudget replaces the Store's default 50ms budget in the
// measurements: they are of throughput, and a loaded machine can exceed
// 50ms now and then, which would count as an error.
const benchBudget = 5 * time.Second

// RedisLibraries returns the limiters measured on Redis, ours first.
func RedisLibraries() []RedisLibrary {
	return []RedisLibrary{
		{
			Name: "sluicehq", Module: "github.com/sluicehq/ratelimit/stores/redis", Algorithm: "GCRA; defaults: concurrent checks coalesced into one script call, denied keys cached locally",
			Notes: "ratelimit.NewLimiter(limit, ByIP(), WithStore(redisstore.New(client, WithTimeout(5s)))).Allow(ctx, key), the defaults but a budget that a loaded machine cannot exceed",
			New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
				return oursCheck(l, redisstore.New(c, redisstore.WithTimeout(benchBudget))), nil
			},
		},
		{
			Name: "sluicehq-plain", Module: "github.com/sluicehq/ratelimit/stores/redis", Algorithm: "GCRA, one EVALSHA per check",
			Notes: "as sluicehq with redisstore.WithoutCoalescing() and redisstore.WithoutDeniedCache(): one script call per check",
			New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
				return oursCheck(l, redisstore.New(c, redisstore.WithoutCoalescing(), redisstore.WithoutDeniedCache(), redisstore.WithTimeout(benchBudget))), nil
			},
		},
		{
			Name: "redis_rate", Module: "github.com/go-redis/redis_rate/v10", Algorithm: "GCRA, one EVALSHA",
			Notes: "redis_rate.NewLimiter(client).Allow(ctx, key, Limit{Rate: n, Burst: n, Period: per})",
			New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
				lim := redis_rate.NewLimiter(c)
				rl := redis_rate.Limit{Rate: l.N, Burst: l.N, Period: l.Per}
				return func(ctx context.Context, key string) (bool, error) {
					res, err := lim.Allow(ctx, key, rl)
					if err != nil {
						return false, err
					}
					return res.Allowed > 0, nil
				}, nil
			},
		},
		{
			Name: "ulule", Module: "github.com/ulule/limiter/v3", Algorithm: "fixed window, one EVALSHA",
			Notes: "limiter.New(redis.NewStoreWithOptions(client, StoreOptions{Prefix}), rate).Get(ctx, key)",
			New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
				st, err := ululeredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule", MaxRetry: ulule.DefaultMaxRetry})
				if err != nil {
					return nil, err
				}
				lim := ulule.New(st, ulule.Rate{Period: l.Per, Limit: int64(l.N)})
				return func(ctx context.Context, key string) (bool, error) {
					res, err := lim.Get(ctx, key)
					return err == nil && !res.Reached, err
				}, nil
			},
		},
		{
			Name: "throttled", Module: "github.com/throttled/throttled/v2", Algorithm: "GCRA, GET+TIME pipeline then a CAS script",
			Notes: "GCRARateLimiterCtx on goredisstore.v9.NewCtx(client, prefix), RateQuota{PerDuration(n, per), MaxBurst: n-1}",
			New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
				st, err := throttledredis.NewCtx(c, "throttled:")
				if err != nil {
					return nil, err
				}
				rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(l.N, l.Per), MaxBurst: l.N - 1})
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context, key string) (bool, error) {
					limited, _, err := rl.RateLimitCtx(ctx, key, 1)
					return err == nil && !limited, err
				}, nil
			},
		},
	}
}

// oursCheck returns a check of one event through a Limiter on st.
func oursCheck(l Limit, st ratelimit.Store) func(context.Context, string) (bool, error) {
	lim := ratelimit.NewLimiter(ours(l), ratelimit.ByIP(), ratelimit.WithStore(st))
	return func(ctx context.Context, key string) (bool, error) {
		res, err := lim.Allow(ctx, key)
		return res.Allowed, err
	}
}

// RedisResult is one Redis throughput measurement.
type RedisResult struct {
	Library  string
	Case     Case
	Workers  int
	Checks   int64
	Wrong    int64 // checks whose decision was not the case's (allowed on deny, denied on allow)
	Errors   int64
	Elapsed  time.Duration
	RTrips   int64 // client round trips (go-redis hook)
	Commands int64 // commands the server ran (INFO commandstats delta, including those inside scripts)
	P50, P99 time.Duration
	// ServerCPU is the CPU time redis-server used during the measurement.
	ServerCPU time.Duration
	// Mallocs is the heap allocations the process made while timing (the
	// library, its go-redis client and the harness's latency samples).
	Mallocs uint64
}

// AllocsPerCheck is the process's heap allocations per check.
func (r RedisResult) AllocsPerCheck() float64 {
	return float64(r.Mallocs) / float64(max(r.Checks, 1))
}

// ServerCPUPerCheck is the redis-server CPU time per check attempted.
func (r RedisResult) ServerCPUPerCheck() time.Duration {
	return r.ServerCPU / time.Duration(max(r.Checks, 1))
}

// ChecksPerSec is the measured throughput of decided checks (those that
// returned an error excluded).
func (r RedisResult) ChecksPerSec() float64 {
	return float64(r.Checks-r.Errors) / r.Elapsed.Seconds()
}

// RoundTripsPerCheck is client round trips per check.
func (r RedisResult) RoundTripsPerCheck() float64 {
	return float64(r.RTrips) / float64(max(r.Checks, 1))
}

// CommandsPerCheck is server commands per check.
func (r RedisResult) CommandsPerCheck() float64 {
	return float64(r.Commands) / float64(max(r.Checks, 1))
}

// RunRedis measures lib on srv for c with workers concurrent checks for d:
// a fresh client (pool of workers connections) and a flushed database.
func RunRedis(srv *RedisServer, lib RedisLibrary, c Case, workers int, d time.Duration) (RedisResult, error) {
	ctx := context.Background()
	client, rt := srv.Client(workers)
	defer client.Close()
	check, keys, err := prepareRedis(ctx, client, lib, c, workers)
	if err != nil {
		return RedisResult{}, err
	}
	res, err := measureChecks(ctx, client, rt, check, keys, c, workers, d)
	res.Library = lib.Name
	return res, err
}

// measureChecks times check on keys as timeChecks does, with the client's
// allocations, its round trips (counted by rt) and the server's CPU and
// commands over the run.
func measureChecks(ctx context.Context, client *redis.Client, rt *RoundTrips, check func(context.Context, string) (bool, error), keys []string, c Case, workers int, d time.Duration) (RedisResult, error) {
	before, err := takeServerCounters(ctx, client)
	if err != nil {
		return RedisResult{}, err
	}
	rt0 := rt.Load()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	res := timeChecks(ctx, check, keys, c, workers, d)
	runtime.ReadMemStats(&m1)
	res.Mallocs = m1.Mallocs - m0.Mallocs
	res.Case, res.Workers = c, workers
	res.RTrips = rt.Load() - rt0
	after, err := takeServerCounters(ctx, client)
	if err != nil {
		return RedisResult{}, err
	}
	res.ServerCPU = after.cpu - before.cpu
	res.Commands = after.commands(before)
	return res, nil
}

// RunRedisFloor measures what one round trip costs by itself: a PING per
// check through a fresh go-redis client (pool of workers connections),
// workers in flight for d. Its server CPU and commands per request are the
// floor under every library's check, which sends at least one command.
func RunRedisFloor(srv *RedisServer, workers int, d time.Duration) (RedisResult, error) {
	ctx := context.Background()
	client, rt := srv.Client(workers)
	defer client.Close()
	if err := forEach(make([]string, workers), workers, func(string) error {
		return client.Ping(ctx).Err() // opens the whole pool
	}); err != nil {
		return RedisResult{}, err
	}
	res, err := measureChecks(ctx, client, rt, func(ctx context.Context, _ string) (bool, error) {
		return true, client.Ping(ctx).Err()
	}, []string{""}, Case{Keys: 1}, workers, d)
	res.Library = "PING"
	return res, err
}

// commands is the number of commands the server ran between before and c,
// the measurement's own INFO excluded.
func (c serverCounters) commands(before serverCounters) int64 {
	var n int64
	for k, v := range c.calls {
		if k != "info" {
			n += v - before.calls[k]
		}
	}
	return n
}

// prepareRedis flushes the database, builds lib's check for c, checks every
// key once (twice on the deny path), verifies that lib kept state for every
// key and opens the whole connection pool, so that the timed checks start
// from the same state for every library.
func prepareRedis(ctx context.Context, client *redis.Client, lib RedisLibrary, c Case, workers int) (func(context.Context, string) (bool, error), []string, error) {
	if err := client.FlushAll(ctx).Err(); err != nil {
		return nil, nil, err
	}
	limit := RedisUnlimited
	if c.Deny {
		limit = OnePerHour
	}
	check, err := lib.New(client, limit)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, c.Keys)
	for i := range keys {
		keys[i] = IP(i)
	}
	expired0, err := ExpiredKeys(ctx, client)
	if err != nil {
		return nil, nil, err
	}
	if err := primeKeys(ctx, check, lib, c, keys, workers); err != nil {
		return nil, nil, err
	}
	if err := checkKeptState(ctx, client, lib, c, expired0); err != nil {
		return nil, nil, err
	}
	// Open the whole pool before timing, so that no connection set-up
	// (HELLO, CLIENT SETINFO) is counted as a round trip of a check.
	if err := forEach(make([]string, workers), workers, func(string) error {
		return client.Ping(ctx).Err()
	}); err != nil {
		return nil, nil, err
	}
	return check, keys, nil
}

// primeKeys checks every key once before timing: each first check passes
// (distinct keys), and on the deny path each second one is denied.
func primeKeys(ctx context.Context, check func(context.Context, string) (bool, error), lib RedisLibrary, c Case, keys []string, workers int) error {
	return forEach(keys, workers, func(k string) error {
		ok, err := check(ctx, k)
		if err != nil || !ok {
			return fmt.Errorf("%s: first check of %s: allowed=%v err=%v", lib.Name, k, ok, err)
		}
		if c.Deny {
			if ok, err := check(ctx, k); err != nil || ok {
				return fmt.Errorf("%s: second check of %s under 1/hour: allowed=%v err=%v", lib.Name, k, ok, err)
			}
		}
		return nil
	})
}

// checkKeptState fails unless every key has state in Redis or has expired
// since expired0. A limit whose arithmetic underflows (redis_rate in float
// seconds cannot add 1ns to the time) would skip its write and time a
// cheaper path than the others. A key whose state is back to full may have
// expired already (ours expire as soon as they are equivalent to absent).
func checkKeptState(ctx context.Context, client *redis.Client, lib RedisLibrary, c Case, expired0 int64) error {
	n, err := client.DBSize(ctx).Result()
	if err != nil {
		return err
	}
	expired1, err := ExpiredKeys(ctx, client)
	if err != nil {
		return err
	}
	if n+expired1-expired0 < int64(c.Keys) {
		return fmt.Errorf("%s %v: %d keys in Redis and %d expired after checking %d keys: the library kept no state", lib.Name, c, n, expired1-expired0, c.Keys)
	}
	return nil
}

// serverCounters are the redis-server counters read around a measurement.
type serverCounters struct {
	calls map[string]int64 // INFO commandstats calls by command
	cpu   time.Duration    // INFO cpu, user + system
}

func takeServerCounters(ctx context.Context, client *redis.Client) (serverCounters, error) {
	calls, err := CommandCalls(ctx, client)
	if err != nil {
		return serverCounters{}, err
	}
	cpu, err := ServerCPU(ctx, client)
	if err != nil {
		return serverCounters{}, err
	}
	return serverCounters{calls: calls, cpu: cpu}, nil
}

// timeChecks runs workers goroutines that check keys in turn for d and
// returns the checks, wrong decisions, errors, elapsed time and latency
// percentiles.
func timeChecks(ctx context.Context, check func(context.Context, string) (bool, error), keys []string, c Case, workers int, d time.Duration) RedisResult {
	var checks, wrong, errs atomic.Int64
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			i := w * 7919
			l := make([]time.Duration, 0, 4096)
			for first := true; ; first = false {
				t0 := time.Now()
				// Every worker checks at least once, even if a loaded
				// machine starts it after the deadline.
				if !first && !t0.Before(deadline) {
					break
				}
				i++
				ok, err := check(ctx, keys[i%len(keys)])
				l = append(l, time.Since(t0))
				checks.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case ok == c.Deny:
					wrong.Add(1)
				}
			}
			lats[w] = l
		}(w)
	}
	wg.Wait()
	res := RedisResult{Elapsed: time.Since(start)}
	res.Checks, res.Wrong, res.Errors = checks.Load(), wrong.Load(), errs.Load()
	all := slices.Concat(lats...)
	res.P50, res.P99 = Percentile(all, 0.50), Percentile(all, 0.99)
	return res
}

func forEach(keys []string, workers int, f func(string) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				if err := f(keys[i]); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// Percentile returns the p-quantile of ds (sorted in place), 0 if empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)-1) * p)
	return ds[i]
}
