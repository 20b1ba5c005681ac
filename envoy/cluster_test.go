package envoy

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// startCluster starts a Redis Cluster of three primaries on free loopback
// ports and returns a client of it.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	cli, server := redisBinary(t, "redis-cli"), redisBinary(t, "redis-server")
	dir := t.TempDir()
	var addrs []string
	for i := range 3 {
		srv := &redisServer{bin: server, port: freePort(t)}
		srv.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--dir", dir}
		srv.start(t)
		t.Cleanup(srv.kill)
		rc := redis.NewClient(&redis.Options{Addr: srv.addr()})
		t.Cleanup(func() { _ = rc.Close() })
		srv.wait(t, rc)
		addrs = append(addrs, srv.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.Command(cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Each node reports cluster_state:ok once it knows every slot's owner.
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, _ := rc.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ok within 30s: %s", a, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = rc.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
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
