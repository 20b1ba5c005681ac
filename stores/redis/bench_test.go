package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// Benchmarks: Take on one hot key and over 10,000 keys (allow path) and on
// a denied hot key, 64 goroutines in parallel, against the shared
// standalone server with server time, for each Store configuration
// (plain: one script call per check; coalesced; default: coalesced with
// the denied cache; lease). The comparison with go-redis/redis_rate, side
// by side with these configurations, is in the bench module
// (BenchmarkRedisCompare*), so that this module does not require it.
//
//	go test -run '^$' -bench . -benchtime 3s ./stores/redis/
//
// roundtrips/op counts the script calls the client sent per check (a hook
// on the client): EVALSHA, plus EVAL when the script had to be loaded;
// connection handshakes (HELLO, CLIENT SETINFO) are not checks. checks/s
// is the throughput; server-µs/call and server-µs/op are the Redis
// server's time per script call and per check, from INFO commandstats.

// commandCounter is a go-redis hook counting the commands sent.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next // neither store pipelines; go-redis's connection handshake does
}

const benchGoroutines = 64

func benchClient(b *testing.B) (*redis.Client, *commandCounter) {
	requireShared(b)
	c := redis.NewClient(&redis.Options{Addr: sharedServer.Addr, PoolSize: benchGoroutines})
	b.Cleanup(func() { c.Close() })
	// Load the script first, so that the measured rounds never meet NOSCRIPT.
	if err := script.Load(context.Background(), c).Err(); err != nil {
		b.Fatal(err)
	}
	counter := &commandCounter{}
	c.AddHook(counter)
	return c, counter
}

var benchKeys = func() []string {
	k := make([]string, 10_000)
	for i := range k {
		k[i] = "198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
	}
	return k
}()

func runParallel(b *testing.B, counter *commandCounter, check func(ctx context.Context, key string) error, keys []string) {
	b.ReportAllocs()
	b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var seq atomic.Int64
	counter.n.Store(0)
	resetServerStats(b)
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
	b.ReportMetric(float64(counter.n.Load())/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
	reportServerTime(b)
}

// resetServerStats clears INFO commandstats on the shared server.
func resetServerStats(b *testing.B) {
	c := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
	defer c.Close()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// reportServerTime reports the server's time per script call and per
// check, from INFO commandstats (evalsha and eval together).
func reportServerTime(b *testing.B) {
	c := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	calls, usec := scriptStats(info)
	if calls > 0 {
		b.ReportMetric(usec/calls, "server-µs/call")
		b.ReportMetric(usec/float64(b.N), "server-µs/op")
	}
}

// scriptStats returns the script calls (evalsha and eval) and the server
// µs they took, from the text of INFO commandstats.
func scriptStats(info string) (calls, usec float64) {
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
	return calls, usec
}

// storeVariants are the configurations the benchmarks compare.
var storeVariants = []struct {
	name string
	opts []Option
}{
	{"plain", []Option{WithoutCoalescing(), WithoutDeniedCache()}},
	{"coalesced", []Option{WithoutDeniedCache()}},
	{"default", nil}, // coalescing and the denied cache
	{"lease", []Option{WithLease(0.0001, 100*time.Millisecond)}},
}

func BenchmarkTake(b *testing.B) {
	// A limit that allows the hot key's whole run: the allow path.
	limit := ratelimit.PerSecond(1_000_000)
	for _, w := range []struct {
		name string
		keys []string
	}{{"hot-key", []string{"hot"}}, {"10k-keys", benchKeys}} {
		for _, v := range storeVariants {
			if v.name == "default" {
				continue // the allow path never meets the denied cache
			}
			b.Run(w.name+"/"+v.name, func(b *testing.B) {
				client, counter := benchClient(b)
				s := newStore(client, append([]Option{WithPrefix(uniquePrefix(b))}, v.opts...)...)
				runParallel(b, counter, func(ctx context.Context, key string) error {
					_, err := s.Take(ctx, stores.Request{Rule: "bench", Key: key, Limit: limit, Cost: 1})
					return err
				}, w.keys)
			})
		}
	}
}

// BenchmarkTakeDenied is the deny path on a hot key.
func BenchmarkTakeDenied(b *testing.B) {
	for _, v := range storeVariants {
		b.Run(v.name, func(b *testing.B) {
			client, counter := benchClient(b)
			s := newStore(client, append([]Option{WithPrefix(uniquePrefix(b))}, v.opts...)...)
			req := stores.Request{Rule: "bench", Key: "hot", Limit: ratelimit.PerHour(1), Cost: 1}
			if _, err := s.Take(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			runParallel(b, counter, func(ctx context.Context, key string) error {
				_, err := s.Take(ctx, req)
				return err
			}, []string{"hot"})
		})
	}
}
