package envoy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// startSentinel starts a primary and one Sentinel watching it as
// "mymaster", and returns a client that finds the primary through the
// Sentinel, as -redis sentinel://mymaster@host:port does.
func startSentinel(t *testing.T) *redis.Client {
	t.Helper()
	primary, _ := startRedisServer(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	// Sentinel rewrites its configuration file: it must be its own.
	if err := os.WriteFile(conf, fmt.Appendf(nil, "sentinel monitor mymaster 127.0.0.1 %d 1\n", primary.port), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := &redisServer{bin: primary.bin, port: freePort(t), sentinelConf: conf}
	sentinel.start(t)
	t.Cleanup(sentinel.kill)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr()})
	t.Cleanup(func() { _ = sc.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		addr, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		if err == nil && len(addr) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel did not name the primary within 20s: %v %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel.addr()}})
	t.Cleanup(func() { _ = fc.Close() })
	return fc
}

// Through a Sentinel-discovered primary the service counts as on a
// standalone server.
func TestServiceCountsThroughSentinel(t *testing.T) {
	fc := startSentinel(t)
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), redisstore.New(fc, redisstore.WithTimeout(10*time.Second)),
		WithReferenceWindows(), WithFailurePolicy(FailWithError()))
	if err != nil {
		t.Fatal(err)
	}
	client := serveGRPC(t, svc)
	for n := 1; n <= 11; n++ {
		resp, err := client.ShouldRateLimit(context.Background(), request("api", [][]string{{"client", "a"}}, 1))
		if err != nil {
			t.Fatal(err)
		}
		want := ok
		if n > 10 {
			want = over
		}
		if st := resp.Statuses[0]; st.Code != want || st.LimitRemaining != uint32(max(0, 10-n)) {
			t.Fatalf("call %d: %v", n, st)
		}
	}
}
