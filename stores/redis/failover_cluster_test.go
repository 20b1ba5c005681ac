package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterOptions is the recommended production client for a Cluster. A
// short ClusterStateReloadInterval is what lets it find a promoted
// replica: go-redis reloads its slot map after MOVED or READONLY, or once
// the map is older than that interval (60s by default), and a dead primary
// refuses connections, so it never answers MOVED.
func clusterOptions(addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true, ClusterStateReloadInterval: time.Second,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		Protocol: 2, DisableIdentity: true,
	}
}

// keysOn counts the keys under prefix on the node at addr.
func keysOn(t *testing.T, addr, prefix string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	keys, _, err := c.Scan(context.Background(), 0, prefix+"*", 10000).Result()
	if err != nil {
		t.Fatalf("SCAN %s: %v", addr, err)
	}
	return len(keys)
}

// ipsOn returns want client IPs whose state the rig's store keeps on the
// node at addr, found by sending one request per candidate.
func ipsOn(t *testing.T, r *foRig, addr string, want int) []string {
	t.Helper()
	var ips []string
	for i := 1; i < 255 && len(ips) < want; i++ {
		n := keysOn(t, addr, r.prefix)
		ip := fmt.Sprintf("198.51.100.%d", i)
		// A cold client may need more than the budget (slot map, script).
		rep := r.serve(ip)
		for try := 0; rep.by != byRedis && try < 50; try++ {
			rep = r.serve(ip)
		}
		if rep.by != byRedis {
			t.Fatalf("warm-up requests from %s not decided by Redis: %+v", ip, rep)
		}
		if keysOn(t, addr, r.prefix) > n {
			ips = append(ips, ip)
		}
	}
	if len(ips) < want {
		t.Fatalf("only %d of 254 client IPs have their state on %s", len(ips), addr)
	}
	return ips
}

// TestClusterFailover kills a Cluster primary (SIGKILL) whose replica's
// link was cut just before, while three Limiters (one per failure policy,
// their clients' state on that primary) and a writer of fresh keys (on
// every shard) run; the Cluster promotes the replica by itself. The same
// checks as TestSentinelFailover apply.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests are slow")
	}
	c := startReplicaCluster(t)
	var primary, replica *redisServer
	var others []string
	for _, n := range c.Nodes {
		if infoField(n.Addr, "replication", "role") != "slave" {
			continue
		}
		port := infoField(n.Addr, "replication", "master_port")
		if primary == nil {
			primary, replica = c.node("127.0.0.1:"+port), n
			continue
		}
		others = append(others, "127.0.0.1:"+port)
	}
	if primary == nil || len(others) != 2 {
		t.Fatalf("cluster layout: primary %v, other primaries %v", primary, others)
	}
	base := runtime.NumGoroutine()

	var clients []redis.UniversalClient
	for range 4 {
		clients = append(clients, redis.NewClusterClient(clusterOptions(c.Addrs())))
	}
	var rigs []*foRig
	for i, p := range foPolicies {
		rigs = append(rigs, newFoRig(t, clients[i], p))
	}
	ips := ipsOn(t, rigs[0], primary.Addr, foWorkers)
	for _, r := range rigs {
		r.ips = ips
	}
	lose := newLoser(t, clients[3])

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range rigs {
		r.load(stop, &wg)
	}
	lose.load(stop, &wg)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitFor(t, 20*time.Second, "300 keys admitted before the kill", func() bool { return lose.count.Load() >= 300 })

	killAt := cutAndKill(t, primary, lose, func() { cutReplication(t, primary.Addr, replica.Addr) })
	snap := lose.snapshot(t, append([]string{replica.Addr}, others...)...)
	waitFor(t, 30*time.Second, "the Cluster promotes the replica", func() bool {
		if infoField(replica.Addr, "replication", "role") != "master" {
			return false
		}
		rc := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
		defer rc.Close()
		info, err := rc.ClusterInfo(context.Background()).Result()
		return err == nil && containsLine(info, "cluster_state:ok")
	})
	promoted := time.Since(killAt)
	for _, r := range rigs {
		if !r.recovered(20 * time.Second) {
			t.Fatalf("%s: Redis does not decide again within 20s of the promotion", r.policy)
		}
	}
	recoveredAll := time.Since(killAt)
	close(stop)
	wg.Wait()

	t.Logf("the Cluster promoted the replica %v after the kill; every Limiter decided by Redis again %v after the kill",
		promoted.Round(time.Millisecond), recoveredAll.Round(time.Millisecond))
	for _, r := range rigs {
		r.check(killAt)
	}
	lose.check(t, killAt, snap)
	for _, c := range clients {
		c.Close()
	}
	goroutinesSettle(t, base, false)
}

func containsLine(text, line string) bool {
	for i := 0; i+len(line) <= len(text); i++ {
		if text[i:i+len(line)] == line && (i == 0 || text[i-1] == '\n') {
			return true
		}
	}
	return false
}
