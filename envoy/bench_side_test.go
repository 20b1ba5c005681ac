package envoy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The side-by-side benchmark's configuration: 10,000 user values, one
// domain where every call fits and one where every call is over (each
// value is charged once before the deny runs, in windows of a day, so that
// the reference's windows do not turn during a run).
const (
	benchValues    = 10_000
	benchAllowYAML = "domain: allow\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1000000000\n"
	benchDenyYAML  = "domain: deny\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: day\n      requests_per_unit: 1\n"
)

// stack is one service process on its own redis-server, or (with ping)
// the benchmark's own Redis client sending a PING per call: the Redis CPU
// of one round trip per call at the same concurrency, or (with floor) a
// gRPC server that answers OK with no work and no Redis: the service CPU
// of the gRPC stack per call.
type stack struct {
	ping      *redis.Client
	floor     bool
	name      string
	svcPID    int
	redisPID  int
	redisAddr string
	client    pb.RateLimitServiceClient
}

// BenchmarkSideBySide runs this module's command and, with
// ENVOY_REFERENCE_BIN, envoyproxy/ratelimit, each as a process on its own
// private redis-server, over gRPC on loopback: allow and deny paths, 1, 16
// and 64 concurrent callers, the two services interleaved at each step. It
// reports p99 latency, the CPU each service process and its Redis spent
// per call, and the Redis commands per call; after the services at each
// step, "redis-ping" sends a bare PING per call from as many callers to a
// redis-server of its own: the Redis CPU of one round trip per call, the
// floor of any service that asks Redis on every call (and, as
// client-cpu-µs/op, the CPU the benchmark's process spent making those
// round trips through go-redis: the client side of one); then "grpc-floor"
// makes the same calls to a process of internal/grpcfloor, a gRPC server
// with the command's grpc-go and server settings whose ShouldRateLimit
// answers OK with no work: the service CPU of the gRPC stack per call,
// the floor of any service of the protocol. It runs only with
// ENVOY_BENCH=1 (it builds both); ENVOY_BASELINE_BIN adds a build
// of the command from another tree (say, main), as "before", interleaved
// with this one; ENVOY_BENCH_CPUPROFILE=file has this tree's command
// write its CPU profile there (-cpuprofile). -count repeats each row in
// place; for rounds interleaved across rows, repeat the run instead:
//
//	for i in 1 2 3; do ENVOY_BENCH=1 ENVOY_REFERENCE_BIN=/path/to/service_cmd \
//	  ENVOY_BASELINE_BIN=/path/to/old/envoy-ratelimit \
//	  go test -run '^$' -bench SideBySide -benchtime 20000x ./envoy; done
func BenchmarkSideBySide(b *testing.B) {
	if os.Getenv("ENVOY_BENCH") == "" {
		b.Skip("ENVOY_BENCH is not set: the side-by-side benchmark builds and starts processes")
	}
	var stacks []*stack
	if bin := os.Getenv("ENVOY_BASELINE_BIN"); bin != "" {
		stacks = append(stacks, startOurs(b, "before", bin))
	}
	stacks = append(stacks, startOurs(b, "this", ""))
	if bin := os.Getenv("ENVOY_REFERENCE_BIN"); bin != "" {
		srv, _ := startRedisServer(b)
		conn, pid := startReference(b, bin, srv.Addr, benchAllowYAML, benchDenyYAML)
		stacks = append(stacks, &stack{name: "reference", svcPID: pid, redisPID: redisPID(b, srv), redisAddr: srv.Addr, client: pb.NewRateLimitServiceClient(conn)})
	}
	srv, _ := startRedisServer(b)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true}) // as the command's
	b.Cleanup(func() { _ = rc.Close() })
	ping := &stack{name: "redis-ping", ping: rc, redisPID: redisPID(b, srv), redisAddr: srv.Addr}
	floor := startFloor(b)
	for _, s := range stacks { // charge every deny value once
		for v := range benchValues {
			if _, err := s.client.ShouldRateLimit(context.Background(), request("deny", [][]string{{"user", strconv.Itoa(v)}}, 1)); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	for _, domain := range []string{"allow", "deny"} {
		for _, callers := range []int{1, 16, 64} {
			for _, s := range append(stacks, ping, floor) {
				b.Run(fmt.Sprintf("%s/callers=%d/%s", domain, callers, s.name), func(b *testing.B) {
					runCallers(b, s, domain, callers)
				})
			}
		}
	}
}

// runCallers makes b.N calls from callers goroutines, each on its own
// sequence of values, and reports their p99 and the CPU per call.
func runCallers(b *testing.B, s *stack, domain string, callers int) {
	want := pb.RateLimitResponse_OK
	if domain == "deny" {
		want = pb.RateLimitResponse_OVER_LIMIT
	}
	lat := make([][]time.Duration, callers)
	cmds0 := s.commandStats(b)
	svc0, redis0 := s.svcTicks(b), s.redisTicks(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range callers {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		wg.Go(func() {
			ls := make([]time.Duration, 0, n)
			for i := range n {
				var req *pb.RateLimitRequest // none for PING: its client CPU is the round trip's
				if s.ping == nil {
					req = request(domain, [][]string{{"user", strconv.Itoa((c*7919 + i) % benchValues)}}, 1)
				}
				start := time.Now()
				resp, err := s.call(req)
				ls = append(ls, time.Since(start))
				if err != nil || s.ping == nil && !s.floor && resp.OverallCode != want {
					b.Errorf("%s %s: %v %v", s.name, domain, resp.GetOverallCode(), err)
					return
				}
			}
			lat[c] = ls
		})
	}
	wg.Wait()
	b.StopTimer()
	svc1, redis1 := s.svcTicks(b), s.redisTicks(b)
	cmds := s.commandStats(b)
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	tick := float64(time.Second/time.Microsecond) / 100 // USER_HZ is 100 on Linux
	if s.ping == nil {
		b.ReportMetric(float64(svc1-svc0)*tick/float64(b.N), "svc-cpu-µs/op")
	} else { // go-redis's side of a round trip, with the callers' loop
		b.ReportMetric(float64(svc1-svc0)*tick/float64(b.N), "client-cpu-µs/op")
	}
	if s.floor {
		return
	}
	b.ReportMetric(float64(redis1-redis0)*tick/float64(b.N), "redis-cpu-µs/op")
	reportCommands(b, cmds0, cmds)
}

// call makes one call of the stack: req, or a PING.
func (s *stack) call(req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.ping != nil {
		return nil, s.ping.Ping(context.Background()).Err()
	}
	return s.client.ShouldRateLimit(context.Background(), req)
}

// svcTicks is the CPU time of the stack's service process; for PING, of
// the benchmark's own process, whose callers make the round trips.
func (s *stack) svcTicks(tb testing.TB) int64 {
	if s.ping != nil {
		return cpuTicks(tb, os.Getpid())
	}
	return cpuTicks(tb, s.svcPID)
}

// redisTicks is the CPU time of the stack's redis-server, 0 for the floor.
func (s *stack) redisTicks(tb testing.TB) int64 {
	if s.floor {
		return 0
	}
	return cpuTicks(tb, s.redisPID)
}

// commandStats is the stack's Redis commands by name, none for the floor.
func (s *stack) commandStats(tb testing.TB) map[string]int64 {
	if s.floor {
		return nil
	}
	return commandStats(tb, s.redisAddr)
}

// reportCommands reports the Redis commands the calls cost (clients' and
// scripts' alike), in all and by name, from two INFO commandstats.
func reportCommands(b *testing.B, before, after map[string]int64) {
	total, names := 0.0, make([]string, 0, len(after))
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" && name != "hello" { // the counting client's
			total += float64(d)
			names = append(names, fmt.Sprintf("%s=%.2f", name, float64(d)/float64(b.N)))
		}
	}
	slices.Sort(names)
	b.ReportMetric(total/float64(b.N), "redis-cmds/op")
	b.Logf("Redis commands per call: %s", strings.Join(names, " "))
}

// commandStats is the number of calls of each command INFO commandstats
// reports on addr.
func commandStats(tb testing.TB, addr string) map[string]int64 {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	out := make(map[string]int64)
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		out[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

// cpuTicks is the user and system time of process pid, in clock ticks.
func cpuTicks(tb testing.TB, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("cpu of %d: %v", pid, err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// startOurs runs the command bin on its own redis-server as the stack
// name; an empty bin builds the command from this tree.
func startOurs(b *testing.B, name, bin string) *stack {
	dir := b.TempDir()
	var profile []string
	if bin == "" {
		bin = build(b, "./cmd/envoy-ratelimit")
		if p := os.Getenv("ENVOY_BENCH_CPUPROFILE"); p != "" {
			profile = []string{"-cpuprofile", p}
		}
	}
	cfg := filepath.Join(dir, "config")
	if err := os.Mkdir(cfg, 0o700); err != nil {
		b.Fatal(err)
	}
	for name, y := range map[string]string{"allow.yaml": benchAllowYAML, "deny.yaml": benchDenyYAML} {
		if err := os.WriteFile(filepath.Join(cfg, name), []byte(y), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	srv, _ := startRedisServer(b)
	// A store error fails the call (and the benchmark) rather than passing
	// for a decision: the reference has no budget, and a loaded machine
	// may exceed the default 50ms.
	s := startGRPC(b, bin, append(profile, "-config", cfg, "-redis", srv.Addr, "-redis-timeout", "2s", "-failure", "error")...)
	s.name, s.redisPID, s.redisAddr = name, redisPID(b, srv), srv.Addr
	return s
}

// startFloor builds and runs internal/grpcfloor as the stack "grpc-floor".
func startFloor(b *testing.B) *stack {
	s := startGRPC(b, build(b, "./internal/grpcfloor"))
	s.name, s.floor = "grpc-floor", true
	return s
}

// build builds the main package pkg of this module into a temporary
// directory and returns the binary's path.
func build(b *testing.B, pkg string) string {
	bin := filepath.Join(b.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startGRPC runs bin with args and -grpc-addr on a free loopback port,
// until b's cleanup, and returns its stack once its health check answers
// SERVING. Cleanup asks the process to stop (SIGTERM) and waits for it, so
// that a profile it writes on the way out is complete.
func startGRPC(b *testing.B, bin string, args ...string) *stack {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(b)))
	cmd := exec.Command(bin, append(args, "-grpc-addr", addr)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	waitServing(b, conn, exited)
	return &stack{svcPID: cmd.Process.Pid, client: pb.NewRateLimitServiceClient(conn)}
}

// waitServing waits until the gRPC health check of conn answers SERVING,
// failing tb if the service exits first or does not serve within 30 s.
func waitServing(tb testing.TB, conn *grpc.ClientConn, exited <-chan struct{}) {
	tb.Helper()
	health := healthpb.NewHealthClient(conn)
	redistest.WaitFor(tb, 30*time.Second, "the service answers its gRPC health check with SERVING", func() bool {
		select {
		case <-exited:
			tb.Fatalf("the service exited before serving")
		default:
		}
		h, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && h.Status == healthpb.HealthCheckResponse_SERVING
	})
}

// redisPID is the process id of srv, as the server reports it.
func redisPID(tb testing.TB, srv *redistest.Server) int {
	tb.Helper()
	pid, err := strconv.Atoi(redistest.Info(srv.Addr, "server", "process_id"))
	if err != nil {
		tb.Fatalf("redis-server process_id: %v", err)
	}
	return pid
}

// BenchmarkRedisFloor measures what Redis spends per call below any
// service, through go-redis as the command configures it, from 1, 16 and
// 64 callers on a private redis-server: a bare PING (the cost of one round
// trip, the floor of any service that asks Redis once per call), the
// reference's pipelined INCRBY and EXPIRE, and the Redis store's Take of
// one GCRA descriptor as the service makes it. It runs with ENVOY_BENCH=1:
//
//	ENVOY_BENCH=1 go test -run '^$' -bench RedisFloor -benchtime 20000x ./envoy
func BenchmarkRedisFloor(b *testing.B) {
	if os.Getenv("ENVOY_BENCH") == "" {
		b.Skip("ENVOY_BENCH is not set: the floor is measured with the side-by-side benchmark")
	}
	srv, _ := startRedisServer(b)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rc.Close() })
	store := redisstore.New(rc, redisstore.WithTimeout(2*time.Second))
	limit := ratelimit.Limit{Rate: 1_000_000_000, Period: time.Hour}
	calls := map[string]func(ctx context.Context, v int) error{
		"ping": func(ctx context.Context, _ int) error { return rc.Ping(ctx).Err() },
		"incrby+expire": func(ctx context.Context, v int) error {
			key := "allow_user_" + strconv.Itoa(v) + "_0"
			p := rc.Pipeline()
			p.IncrBy(ctx, key, 1)
			p.Expire(ctx, key, time.Hour)
			_, err := p.Exec(ctx)
			return err
		},
		"store-take": func(ctx context.Context, v int) error {
			_, err := store.Take(ctx, stores.Request{Rule: "allow", Key: "user_" + strconv.Itoa(v) + "_", Limit: limit, Cost: 1})
			return err
		},
	}
	pid := redisPID(b, srv)
	for _, callers := range []int{1, 16, 64} {
		for _, name := range []string{"ping", "incrby+expire", "store-take"} {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, name), func(b *testing.B) {
				call := calls[name]
				cmds0, redis0 := commandStats(b, srv.Addr), cpuTicks(b, pid)
				b.ResetTimer()
				var wg sync.WaitGroup
				for c := range callers {
					wg.Go(func() {
						for i := c; i < b.N; i += callers {
							if err := call(context.Background(), (c*7919+i)%benchValues); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				redis1 := cpuTicks(b, pid)
				reportCommands(b, cmds0, commandStats(b, srv.Addr))
				b.ReportMetric(float64(redis1-redis0)*float64(time.Second/time.Microsecond)/100/float64(b.N), "redis-cpu-µs/op")
			})
		}
	}
}
