package envoy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// redisServer is one redis-server process on a loopback port.
type redisServer struct {
	bin  string
	args []string // more redis-server arguments
	// sentinelConf, when set, runs a Sentinel with that configuration file.
	sentinelConf string
	port         int
	cmd          *exec.Cmd
	exited       chan struct{}
}

// startRedis starts a redis-server without persistence on a free loopback
// port and stops it when the test ends. Without redis-server the test
// skips, loudly, or fails when CI is set: a skipped Redis suite must not
// pass for a green one in CI.
func startRedis(t testing.TB) *redis.Client {
	t.Helper()
	_, rc := startRedisServer(t)
	return rc
}

func startRedisServer(t testing.TB) (*redisServer, *redis.Client) {
	t.Helper()
	s := &redisServer{bin: redisBinary(t, "redis-server"), port: freePort(t)}
	s.start(t)
	t.Cleanup(s.kill)
	rc := redis.NewClient(&redis.Options{Addr: s.addr()})
	t.Cleanup(func() { _ = rc.Close() })
	s.wait(t, rc)
	return s, rc
}

// redisBinary is the path of name (redis-server, redis-cli). Without it
// the test skips, loudly, or fails when CI is set.
func redisBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: CI must run the Redis tests (apt-get install redis-server redis-tools)", name)
		}
		t.Skipf("SKIPPED LOUDLY: %s is not installed, the Redis tests of the envoy module did not run", name)
	}
	return bin
}

func (s *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (s *redisServer) start(t testing.TB) {
	t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--enable-debug-command", "local"}
	if s.sentinelConf != "" {
		args = []string{s.sentinelConf, "--sentinel", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1"}
	}
	s.cmd = exec.Command(s.bin, append(args, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.cmd, s.exited)
}

// kill stops the server at once, as a crash, and waits for it to exit.
func (s *redisServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// wait waits for the server to answer: each PING fails at once until it
// listens, and redis-server listens within a moment of starting.
func (s *redisServer) wait(t testing.TB, rc *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for rc.Ping(context.Background()).Err() != nil {
		select {
		case <-s.exited:
			t.Fatalf("redis-server exited before answering")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer within 20s", s.port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
