package envoy

import (
	"net"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// startRedis starts a redis-server on a free loopback port for t (see
// redistest.Require: a missing redis-server skips loudly, or fails under
// CI) and returns a client of it.
func startRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	_, rc := startRedisServer(tb)
	return rc
}

// startRedisServer is startRedis with the server, which a fault test stops
// and starts again on its port. DEBUG is enabled for DEBUG SLEEP.
func startRedisServer(tb testing.TB) (*redistest.Server, *redis.Client) {
	tb.Helper()
	srv := redistest.NewServer(tb, "--enable-debug-command", "local")
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	tb.Cleanup(func() { _ = rc.Close() })
	return srv, rc
}

// freePort is a free loopback port, for a process the test starts itself.
func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := redistest.FreePort(false)
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// serveGRPC serves svc on a loopback listener and returns a client of it.
func serveGRPC(t testing.TB, svc *Service) pb.RateLimitServiceClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// newRawClient is a client of its own, with no retries, so that a test
// can hold or probe the server beside the store's connections.
func newRawClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
}
