// Command envoy-ratelimit serves Envoy's global rate limit protocol
// (envoy.service.ratelimit.v3.RateLimitService) from envoyproxy/ratelimit's
// YAML configuration, on Redis or in memory. See docs/envoy.md.
//
//	envoy-ratelimit -config /etc/ratelimit/config -redis 127.0.0.1:6379 -grpc-addr :8081
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/envoy"
	"github.com/sluicehq/ratelimit/envoy/internal/grpcserve"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
	"github.com/sluicehq/ratelimit/stores/memory"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	grpcserve.TuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// flags are the command's settings.
type flags struct {
	config, redis, grpcAddr, metricsAddr string
	cpuProfile                           string
	algorithm, failure                   string
	timeout, redisTimeout, reload        time.Duration
	shadow, noHeaders, noBreaker         bool
}

func parseFlags(args []string, out io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("envoy-ratelimit", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&f.config, "config", "", "a YAML file of envoyproxy/ratelimit's format, or a directory of them (required)")
	fs.StringVar(&f.redis, "redis", "", "Redis: host:port, redis://..., cluster://h:p,h:p or sentinel://master@h:p,h:p; empty for a memory store")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:8081", "host:port to serve gRPC (RateLimitService and grpc.health.v1) on")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "host:port to serve /metrics (Prometheus) and /healthz on; empty for none")
	fs.StringVar(&f.algorithm, "algorithm", "gcra", "gcra, sliding-window, fixed-window, sliding-log (exact in any trailing unit, at most 10000 per unit), or reference (the reference's fixed windows, exactly)")
	fs.StringVar(&f.failure, "failure", "open", "when the store fails: open, closed, error (gRPC UNAVAILABLE: Envoy's failure_mode_deny decides), fallback or fallback/N (memory, limit divided by N instances)")
	fs.DurationVar(&f.timeout, "timeout", 0, "budget of each call's store work; 0 leaves it to -redis-timeout")
	fs.DurationVar(&f.redisTimeout, "redis-timeout", redisstore.DefaultTimeout, "budget of each Redis call")
	fs.DurationVar(&f.reload, "reload-interval", 2*time.Second, "how often the configuration is checked for changes")
	fs.BoolVar(&f.shadow, "shadow", false, "global shadow mode: answer OK whatever the limits say")
	fs.BoolVar(&f.noHeaders, "no-headers", false, "do not ask Envoy to add RateLimit, RateLimit-Policy and Retry-After")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the process to this file, from start to shutdown (SIGTERM), for go tool pprof")
	fs.BoolVar(&f.noBreaker, "no-breaker", false, "call Redis even after repeated failures (no circuit breaker)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.config == "" {
		return nil, errors.New("ratelimit: -config is required")
	}
	return f, nil
}

func (f *flags) options() ([]envoy.Option, error) {
	var opts []envoy.Option
	switch f.algorithm {
	case "gcra":
	case "sliding-window":
		opts = append(opts, envoy.WithAlgorithm(ratelimit.SlidingWindow))
	case "fixed-window":
		opts = append(opts, envoy.WithAlgorithm(ratelimit.FixedWindow))
	case "sliding-log":
		opts = append(opts, envoy.WithAlgorithm(ratelimit.SlidingLog))
	case "reference":
		opts = append(opts, envoy.WithReferenceWindows())
	default:
		return nil, fmt.Errorf("ratelimit: -algorithm %q: want gcra, sliding-window, fixed-window, sliding-log or reference", f.algorithm)
	}
	p, err := failurePolicy(f.failure)
	if err != nil {
		return nil, err
	}
	opts = append(opts, envoy.WithFailurePolicy(p), envoy.WithTimeout(f.timeout))
	if f.shadow {
		opts = append(opts, envoy.WithShadowMode())
	}
	if f.noHeaders {
		opts = append(opts, envoy.WithoutHeaders())
	}
	return opts, nil
}

func failurePolicy(s string) (envoy.FailurePolicy, error) {
	switch s {
	case "open":
		return envoy.FailOpen(), nil
	case "closed":
		return envoy.FailClosed(), nil
	case "error":
		return envoy.FailWithError(), nil
	case "fallback":
		return envoy.FallbackTo(memory.New()), nil
	}
	if n, ok := strings.CutPrefix(s, "fallback/"); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 1 {
			return envoy.FallbackTo(memory.New()).DividedBy(i), nil
		}
	}
	return envoy.FailurePolicy{}, fmt.Errorf("ratelimit: -failure %q: want open, closed, error, fallback or fallback/N", s)
}

// run serves until ctx is done. ready, if set, is called with the gRPC
// listener's address once it serves.
func run(ctx context.Context, args []string, logOut io.Writer, ready func(grpcAddr string)) error {
	f, err := parseFlags(args, logOut)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	if f.cpuProfile != "" {
		stopProfile, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	obs := ratelimitprom.New()
	store, rs, closeStore, err := f.store(log, obs)
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := envoy.New(nil, store, append(opts, envoy.WithObserver(obs))...)
	if err != nil {
		return err
	}
	w, err := envoy.Watch(f.config, svc, envoy.WatchOptions{Interval: f.reload, Logger: log})
	if err != nil {
		return err
	}
	defer w.Close()

	lis, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return fmt.Errorf("ratelimit: -grpc-addr: %w", err)
	}
	srv := grpc.NewServer(grpcserve.ServerOptions()...)
	svc.Register(srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("envoy.service.ratelimit.v3.RateLimitService", healthpb.HealthCheckResponse_SERVING)
	if f.metricsAddr != "" {
		stopMetrics, err := serveMetrics(f.metricsAddr, registry(obs, svc, rs), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	log.Info("envoy-ratelimit serving", "grpc", lis.Addr().String(), "domains", svc.Rules().Domains(),
		"limits", svc.Rules().Limits(), "algorithm", f.algorithm, "failure", f.failure)
	if ready != nil {
		ready(lis.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		hs.Shutdown() // NOT_SERVING: Envoy's health checks move traffic away first
		srv.GracefulStop()
		return nil
	case err := <-errc:
		return err
	}
}

// store is the memory store without -redis, else the Redis store (behind
// a circuit breaker unless -no-breaker, its state on obs), with coalescing
// and the denied cache on. The Redis store is returned for its counters.
func (f *flags) store(log *slog.Logger, obs *ratelimitprom.Observer) (ratelimit.Store, *redisstore.Store, func(), error) {
	if f.redis == "" {
		return memory.New(), nil, func() {}, nil
	}
	rc, err := redisClient(f.redis)
	if err != nil {
		return nil, nil, nil, err
	}
	rs := redisstore.New(rc, redisstore.WithTimeout(f.redisTimeout))
	closeClient := func() { _ = rc.Close() }
	if f.noBreaker {
		return rs, rs, closeClient, nil
	}
	gauge := obs.BreakerStateChange("redis")
	br := breaker.New(rs, breaker.Config{OnStateChange: func(from, to breaker.State) {
		gauge(from, to)
		log.Warn("ratelimit: Redis circuit breaker", "from", from.String(), "to", to.String())
	}})
	return br, rs, closeClient, nil
}

// registry gathers the decisions of every descriptor (the library's
// Prometheus observer: ratelimit_decisions_total, store latency, breaker
// state), the service's call counters and the Redis store's.
func registry(obs *ratelimitprom.Observer, svc *envoy.Service, rs *redisstore.Store) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	counter := func(name, help string, f func() int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
	}
	counter("envoy_ratelimit_calls_total", "ShouldRateLimit calls.", func() int64 { return svc.Stats().Calls })
	counter("envoy_ratelimit_over_limit_total", "Calls answered OVER_LIMIT (before global shadow mode).", func() int64 { return svc.Stats().OverLimit })
	counter("envoy_ratelimit_store_errors_total", "Descriptors the store could not decide.", func() int64 { return svc.Stats().StoreErrors })
	if rs != nil {
		counter("envoy_ratelimit_redis_round_trips_total", "Script calls to Redis.", func() int64 { return rs.Stats().RoundTrips })
		counter("envoy_ratelimit_redis_checks_sent_total", "Checks those calls carried.", func() int64 { return rs.Stats().Sent })
		counter("envoy_ratelimit_redis_denied_cache_hits_total", "Checks the denied cache answered.", func() int64 { return rs.Stats().DeniedCacheHits })
	}
	return reg
}

// serveMetrics serves reg on /metrics, and /healthz.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: -metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hsrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ratelimit: metrics server", "err", err)
		}
	}()
	return func() { _ = hsrv.Close() }, nil
}

// startCPUProfile profiles the process's CPU into the file path until the
// returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("ratelimit: -cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
