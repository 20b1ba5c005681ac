package envoy

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// startSentinel starts a primary, a replica and three Sentinels watching
// them as "mymaster", and returns a client that finds the primary through
// the Sentinels, as -redis sentinel://mymaster@host:port does.
func startSentinel(t *testing.T) *redis.Client {
	t.Helper()
	set := redistest.NewSentinelSet(t, "mymaster")
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: set.Master, SentinelAddrs: set.SentinelAddrs()})
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
