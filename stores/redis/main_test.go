package redisstore

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// TestMain starts the shared servers once for the package, runs the tests,
// then checks that every key any test left behind has a TTL.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // the fault tests make go-redis log dial failures
	if redisBinary == "" {
		// Each Redis test skips, or fails when CI is set; say so loudly,
		// since "ok" alone would read as a pass.
		code := m.Run()
		if os.Getenv("CI") == "" {
			redistest.Announce(redistest.NotRunLine("redisstore", "REDIS STORE TESTS", "go test ./stores/redis/..."))
		}
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "redisstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedErr = startShared(dir)
	code := m.Run()
	if code == 0 && sharedErr == nil {
		code = checkAllKeysHaveTTL()
	}
	stopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// checkAllKeysHaveTTL scans the shared servers, as redis-cli --scan with
// PTTL would, and reports any key without a positive TTL.
func checkAllKeysHaveTTL() int {
	ctx := context.Background()
	clients := []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: sharedServer.Addr}),
		redis.NewClient(&redis.Options{Addr: sharedServer2.Addr}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: sharedCluster.Addrs()}),
	}
	code, total := 0, 0
	for _, c := range clients {
		bad, n, err := keysWithoutTTL(ctx, c)
		total += n
		if err != nil {
			fmt.Fprintf(os.Stderr, "TTL scan: %v\n", err)
			code = 1
		}
		for _, k := range bad {
			fmt.Fprintf(os.Stderr, "key without TTL after the tests: %s\n", k)
			code = 1
		}
		c.Close()
	}
	if testing.Verbose() {
		fmt.Printf("TTL scan: %d keys left by the tests, every one with a TTL: %v\n", total, code == 0)
	}
	return code
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
