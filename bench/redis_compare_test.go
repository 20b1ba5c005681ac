package bench

// Benchmarks of the Redis store's configurations beside go-redis/redis_rate,
// side by side in one run, moved here from stores/redis so that the store's
// module does not require redis_rate: Take on one hot key and over 10,000
// keys (allow path), and on a denied hot key, 64 goroutines in parallel,
// against one redis-server with server time.
//
//	go test -run '^$' -bench RedisCompare -benchtime 3s ./bench/
//
// roundtrips/op counts the commands sent per check (connection handshakes
// excluded); checks/s is the throughput; server-µs/call and server-µs/op
// are the server's time per script call and per check, from INFO
// commandstats (eval and evalsha).

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

const compareGoroutines = 64

// compareBudget replaces the Store's default 50ms budget: a cold pool's
// first calls (64 dials and the script's load) may take longer on a
// loaded machine, and the benchmarks measure throughput, not budgets.
const compareBudget = 10 * time.Second

// compareVariants are the Store configurations compared.
var compareVariants = []struct {
	name string
	opts []redisstore.Option
}{
	{"plain", []redisstore.Option{redisstore.WithoutCoalescing(), redisstore.WithoutDeniedCache()}},
	{"coalesced", []redisstore.Option{redisstore.WithoutDeniedCache()}},
	{"default", nil}, // coalescing and the denied cache
	{"lease", []redisstore.Option{redisstore.WithLease(0.0001, 100*time.Millisecond)}},
}

var compareKeys = func() []string {
	k := make([]string, 10_000)
	for i := range k {
		k[i] = "198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
	}
	return k
}()

var comparePrefixes atomic.Int64

func comparePrefix() string { return "cmp" + strconv.FormatInt(comparePrefixes.Add(1), 10) + ":" }

func startBenchRedis(b *testing.B) *RedisServer {
	b.Helper()
	redistest.Require(b)
	srv, err := StartRedis()
	if err != nil {
		b.Skip("redis-server: ", err)
	}
	b.Cleanup(srv.Stop)
	return srv
}

func compareClient(b *testing.B, srv *RedisServer) (*redis.Client, *RoundTrips) {
	c, rt := srv.Client(compareGoroutines)
	b.Cleanup(func() { c.Close() })
	return c, rt
}

func BenchmarkRedisCompareTake(b *testing.B) {
	srv := startBenchRedis(b)
	limit := ratelimit.PerSecond(1_000_000) // the allow path
	for _, w := range []struct {
		name string
		keys []string
	}{{"hot-key", []string{"hot"}}, {"10k-keys", compareKeys}} {
		for _, v := range compareVariants {
			if v.name == "default" {
				continue // the allow path never meets the denied cache
			}
			b.Run(w.name+"/"+v.name, func(b *testing.B) {
				client, rt := compareClient(b, srv)
				s := redisstore.New(client, append([]redisstore.Option{redisstore.WithPrefix(comparePrefix()), redisstore.WithTimeout(compareBudget)}, v.opts...)...)
				compareParallel(b, srv, rt, func(ctx context.Context, key string) error {
					_, err := s.Take(ctx, stores.Request{Rule: "bench", Key: key, Limit: limit, Cost: 1})
					return err
				}, w.keys)
			})
		}
		b.Run(w.name+"/redis_rate", func(b *testing.B) {
			client, rt := compareClient(b, srv)
			l := redis_rate.NewLimiter(client)
			prefix := comparePrefix()
			rl := redis_rate.PerSecond(1_000_000)
			compareParallel(b, srv, rt, func(ctx context.Context, key string) error {
				_, err := l.Allow(ctx, prefix+key, rl)
				return err
			}, w.keys)
		})
	}
}

func BenchmarkRedisCompareTakeDenied(b *testing.B) {
	srv := startBenchRedis(b)
	for _, v := range compareVariants {
		b.Run(v.name, func(b *testing.B) {
			client, rt := compareClient(b, srv)
			s := redisstore.New(client, append([]redisstore.Option{redisstore.WithPrefix(comparePrefix()), redisstore.WithTimeout(compareBudget)}, v.opts...)...)
			req := stores.Request{Rule: "bench", Key: "hot", Limit: ratelimit.PerHour(1), Cost: 1}
			if _, err := s.Take(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			compareParallel(b, srv, rt, func(ctx context.Context, _ string) error {
				_, err := s.Take(ctx, req)
				return err
			}, []string{"hot"})
		})
	}
	b.Run("redis_rate", func(b *testing.B) {
		client, rt := compareClient(b, srv)
		l := redis_rate.NewLimiter(client)
		key := comparePrefix() + "hot"
		rl := redis_rate.PerHour(1)
		if _, err := l.Allow(context.Background(), key, rl); err != nil {
			b.Fatal(err)
		}
		compareParallel(b, srv, rt, func(ctx context.Context, _ string) error {
			_, err := l.Allow(ctx, key, rl)
			return err
		}, []string{"hot"})
	})
}

func compareParallel(b *testing.B, srv *RedisServer, rt *RoundTrips, check func(ctx context.Context, key string) error, keys []string) {
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	b.ReportAllocs()
	b.SetParallelism((compareGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var seq atomic.Int64
	if err := admin.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	start := rt.Load()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := int(seq.Add(7919))
		for pb.Next() {
			i++
			if err := check(ctx, keys[i%len(keys)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(rt.Load()-start)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var calls, usec float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	if calls > 0 {
		b.ReportMetric(usec/calls, "server-µs/call")
		b.ReportMetric(usec/float64(b.N), "server-µs/op")
	}
}

// TestRedisCost measures the cost of one check on Redis for each library
// side by side, at exactly 1, 4 and 64 checks in flight, allow and deny,
// one hot key and 10,000 keys: µs per check, p50 and p99 latency, server CPU
// and commands per check (INFO cpu and commandstats) and the process's
// allocations per check. It is a measurement, not a check: it runs only
// with RATELIMIT_REDIS_COST set (to the seconds per row, default 2), and
// rounds of it are interleaved by -count:
//
//	RATELIMIT_REDIS_COST=2 go test -run TestRedisCost -cpu 2 -count 3 -v ./bench/
//
// RATELIMIT_REDIS_COST_ROWS, a regular expression, keeps only the rows
// whose "case/in flight/library" it matches ("allow/keys=1/4/sluicehq$").
// The first rows, "floor/<in flight>/PING", are one PING per check through
// the same client: what a round trip costs the server by itself.
func TestRedisCost(t *testing.T) {
	secs := os.Getenv("RATELIMIT_REDIS_COST")
	if secs == "" {
		t.Skip("a measurement: set RATELIMIT_REDIS_COST to run it")
	}
	d, err := time.ParseDuration(secs + "s")
	if err != nil {
		t.Fatalf("RATELIMIT_REDIS_COST=%q: %v", secs, err)
	}
	srv := startRedis(t)
	var libs []RedisLibrary
	for _, l := range RedisLibraries() {
		if l.Name != "throttled" {
			libs = append(libs, l)
		}
	}
	// Our defaults on a client set up as docs/failure.md recommends: reads
	// bounded by ctx (so a check needs no goroutine of its own to keep its
	// budget) and no resends.
	libs = append(libs, RedisLibrary{Name: "sluicehq-recommended", New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
		o := *c.(*redis.Client).Options()
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		rc := redis.NewClient(&o)
		t.Cleanup(func() { rc.Close() })
		return oursCheck(l, redisstore.New(rc, redisstore.WithTimeout(benchBudget))), nil
	}})
	// Each of the recommended client's two settings alone, which tell apart
	// what each costs: ctx-bounded reads (no goroutine hand-off per call)
	// and no resends (no call id in the state).
	for _, v := range []struct {
		name string
		set  func(*redis.Options)
	}{
		{"sluicehq-ctx", func(o *redis.Options) { o.ContextTimeoutEnabled = true }},
		{"sluicehq-noresend", func(o *redis.Options) { o.MaxRetries = -1 }},
	} {
		libs = append(libs, RedisLibrary{Name: v.name, New: func(c redis.UniversalClient, l Limit) (func(context.Context, string) (bool, error), error) {
			o := *c.(*redis.Client).Options()
			v.set(&o)
			rc := redis.NewClient(&o)
			t.Cleanup(func() { rc.Close() })
			return oursCheck(l, redisstore.New(rc, redisstore.WithTimeout(benchBudget))), nil
		}})
	}
	var only *regexp.Regexp // RATELIMIT_REDIS_COST_ROWS: the rows whose "case/in flight/library" it matches
	if expr := os.Getenv("RATELIMIT_REDIS_COST_ROWS"); expr != "" {
		if only, err = regexp.Compile(expr); err != nil {
			t.Fatalf("RATELIMIT_REDIS_COST_ROWS=%q: %v", expr, err)
		}
	}
	t.Logf("| case | in flight | library | µs/check | p50 | p99 | server CPU/check | commands/check | allocs/check |")
	logRow := func(c string, workers int, r RedisResult) {
		perCheck := float64(r.Elapsed.Microseconds()) / float64(max(r.Checks, 1))
		t.Logf("| %s | %d | %s | %.1f | %v | %v | %.1f µs | %.2f | %.1f |", c, workers, r.Library, perCheck,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond),
			float64(r.ServerCPUPerCheck().Nanoseconds())/1000, r.CommandsPerCheck(), r.AllocsPerCheck())
	}
	// The floor: one PING per check, what a round trip costs by itself.
	for _, workers := range []int{1, 4, 64} {
		if only != nil && !only.MatchString(fmt.Sprintf("floor/%d/PING", workers)) {
			continue
		}
		r, err := RunRedisFloor(srv, workers, d)
		if err != nil {
			t.Fatal(err)
		}
		if r.Errors != 0 {
			t.Errorf("PING: %d errors", r.Errors)
		}
		logRow("floor", workers, r)
	}
	for _, c := range []Case{{false, 10_000}, {false, 1}, {true, 10_000}, {true, 1}} {
		for _, workers := range []int{1, 4, 64} {
			for _, lib := range libs {
				if only != nil && !only.MatchString(fmt.Sprintf("%v/%d/%s", c, workers, lib.Name)) {
					continue
				}
				r, err := RunRedis(srv, lib, c, workers, d)
				if err != nil {
					t.Fatal(err)
				}
				if r.Wrong != 0 || r.Errors != 0 {
					t.Errorf("%s %v: %d wrong, %d errors", lib.Name, c, r.Wrong, r.Errors)
				}
				logRow(c.String(), workers, r)
			}
		}
	}
}
