package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The command serves the configuration it is given over gRPC, with
// health checking, and stops cleanly when its context ends.
func TestCommandServesRateLimitAndHealth(t *testing.T) {
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc, errc := make(chan string, 1), make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-config", dir, "-grpc-addr", "127.0.0.1:0", "-metrics-addr", metricsAddr}, io.Discard, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	client := pb.NewRateLimitServiceClient(conn)
	req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("call %d: %v %v, want %v", i, resp, err, want)
		}
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`ratelimit_decisions_total{key_kind="envoy",outcome="allowed",rule="d.k"} 1`,
		`ratelimit_decisions_total{key_kind="envoy",outcome="denied",rule="d.k"} 1`,
		`envoy_ratelimit_calls_total 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A broken configuration stops the command at start, with its line:col.
func TestCommandRefusesABrokenConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: eon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-config", path, "-grpc-addr", "127.0.0.1:0"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:3:5") {
		t.Fatalf("run: %v, want the problem at bad.yaml:3:5", err)
	}
}

// Each documented -redis form makes the client it names, with
// ContextTimeoutEnabled (each call's budget bounds its socket reads and
// writes); anything else is refused.
func TestRedisAddressForms(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   func(redis.UniversalClient) bool
	}{
		{"127.0.0.1:6379", func(c redis.UniversalClient) bool {
			cl, ok := c.(*redis.Client)
			return ok && cl.Options().Addr == "127.0.0.1:6379" && cl.Options().ContextTimeoutEnabled
		}},
		{"redis://:pw@10.0.0.1:6380/2", func(c redis.UniversalClient) bool {
			cl, ok := c.(*redis.Client)
			return ok && cl.Options().Addr == "10.0.0.1:6380" && cl.Options().DB == 2 && cl.Options().Password == "pw" && cl.Options().ContextTimeoutEnabled
		}},
		{"cluster://a:7000,b:7001", func(c redis.UniversalClient) bool {
			cl, ok := c.(*redis.ClusterClient)
			return ok && cl.Options().ContextTimeoutEnabled
		}},
		{"sentinel://mymaster@a:26379,b:26379", func(c redis.UniversalClient) bool {
			cl, ok := c.(*redis.Client)
			return ok && cl.Options().ContextTimeoutEnabled
		}},
	} {
		c, err := redisClient(tc.addr)
		if err != nil || !tc.ok(c) {
			t.Errorf("%s: %T %v", tc.addr, c, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
	for _, bad := range []string{"", "nohost", "sentinel://a:1", "cluster://a:1,b", "a:1,b:2"} {
		if _, err := redisClient(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// -cpuprofile writes a CPU profile that go tool pprof reads (gzipped
// protobuf) once the command stops; an unwritable path stops it at start.
func TestCommandWritesItsCPUProfileOnShutdown(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-config", dir, "-grpc-addr", "127.0.0.1:0", "-cpuprofile", path}, io.Discard, func(string) { cancel() })
	}()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("profile: %d bytes %x, err %v; want a gzipped profile", len(data), data[:min(len(data), 2)], err)
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.pprof")
	if err := run(context.Background(), []string{"-config", dir, "-grpc-addr", "127.0.0.1:0", "-cpuprofile", bad}, io.Discard, nil); err == nil || !strings.Contains(err.Error(), "-cpuprofile") {
		t.Fatalf("run with %s: %v, want a -cpuprofile error", bad, err)
	}
}
