package envoy

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// startCluster starts a Redis Cluster of three primaries on free loopback
// ports and returns a client of it.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	cluster := redistest.NewCluster(t, redistest.ClusterConfig{Primaries: 3})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// On a Redis Cluster, the descriptors of one request live in different
// slots (different nodes): each is still charged and decided.
func TestDescriptorsAcrossClusterSlotsAreEachCharged(t *testing.T) {
	cc := startCluster(t)
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), redisstore.New(cc, redisstore.WithTimeout(10*time.Second)), WithReferenceWindows(), WithFailurePolicy(FailWithError()))
	if err != nil {
		t.Fatal(err)
	}
	client := serveGRPC(t, svc)
	var descs [][]string
	for i := range 8 {
		descs = append(descs, []string{"client", "c" + strconv.Itoa(i)})
	}
	for n := 1; n <= 11; n++ {
		resp, err := client.ShouldRateLimit(context.Background(), request("api", descs, 1))
		if err != nil {
			t.Fatal(err)
		}
		want, remain := ok, uint32(max(0, 10-n))
		if n > 10 {
			want = over
		}
		for i, st := range resp.Statuses {
			if st.Code != want || st.LimitRemaining != remain {
				t.Fatalf("call %d, descriptor %d: %v remaining %d, want %v remaining %d", n, i, st.Code, st.LimitRemaining, want, remain)
			}
		}
	}
}
