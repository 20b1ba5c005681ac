package envoy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// referenceBin is the envoyproxy/ratelimit service binary to compare
// against (built with go install
// github.com/envoyproxy/ratelimit/src/service_cmd@<version>); the
// side-by-side tests and benchmarks skip without it.
func referenceBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("ENVOY_REFERENCE_BIN")
	if bin == "" {
		tb.Skip("ENVOY_REFERENCE_BIN is not set: the side-by-side run against envoyproxy/ratelimit is skipped")
	}
	return bin
}

// startReference runs the reference service on Redis at redisAddr with
// the configuration yamls (one file each), and returns a client of it and
// its process id.
func startReference(tb testing.TB, bin, redisAddr string, yamls ...string) (*grpc.ClientConn, int) {
	tb.Helper()
	root := tb.TempDir()
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i, y := range yamls {
		if err := os.WriteFile(filepath.Join(cfgDir, fmt.Sprintf("c%d.yaml", i)), []byte(y), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	grpcPort := freePort(tb)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr, "USE_STATSD=false", "LOG_LEVEL=error",
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(freePort(tb)), "DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(freePort(tb)),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(grpcPort))
	logFile, err := os.Create(filepath.Join(root, "reference.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile // its stats sink logs every flush
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the reference: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	// It serves once its configuration is loaded.
	waitServing(tb, conn, exited)
	return conn, cmd.Process.Pid
}

// replayWallClock replays ex on client with the wall clock, as the
// reference counts; a replay whose calls straddled the end of a second (a
// per-second window) is flushed and made again, up to 5 times.
func replayWallClock(t *testing.T, rc *redis.Client, client pb.RateLimitServiceClient, ex example) {
	t.Helper()
	for try := 0; ; try++ {
		start := time.Now().Unix()
		var failed error
		for n, c := range ex.calls {
			for rep := range max(1, c.times) {
				resp, err := client.ShouldRateLimit(context.Background(), request(ex.domain, c.descs, c.hits))
				if err == nil {
					err = matches(resp, c, time.Now, false)
				}
				if err != nil && failed == nil {
					failed = fmt.Errorf("call %d.%d %v: %w", n, rep, c.descs, err)
				}
			}
		}
		if failed == nil {
			return
		}
		if time.Now().Unix() == start || try == 5 {
			t.Fatal(failed)
		}
		if err := rc.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Both services, on one Redis, give each example's calls the answers the
// examples expect: the reference's own, and this service's with its
// windows (WithReferenceWindows) on Redis's clock.
func TestReferenceAndServiceAgreeOnTheExamples(t *testing.T) {
	bin := referenceBin(t)
	rc := startRedis(t)
	addr := rc.Options().Addr
	for i, ex := range examples {
		t.Run("reference/"+ex.name, func(t *testing.T) {
			conn, _ := startReference(t, bin, addr, ex.yaml)
			replayWallClock(t, rc, pb.NewRateLimitServiceClient(conn), ex)
		})
		t.Run("service/"+ex.name, func(t *testing.T) {
			store := redisstore.New(rc, redisstore.WithPrefix(fmt.Sprintf("side:%d:", i)), redisstore.WithTimeout(10*time.Second))
			svc, err := New(compileYAML(t, ex.domain+".yaml", ex.yaml), store, WithReferenceWindows(), WithFailurePolicy(FailWithError()))
			if err != nil {
				t.Fatal(err)
			}
			replayWallClock(t, rc, serveGRPC(t, svc), ex)
		})
	}
}
