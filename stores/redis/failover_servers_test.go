package redisstore

// Launchers for the failover tests: a primary with a replica watched by
// three Sentinels (redis-server --sentinel, so only the redis-server binary
// is needed), and a Cluster of three primaries each with a replica.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const sentinelMaster = "failover-primary"

// sentinelSet is a primary, its replica and three Sentinels.
type sentinelSet struct {
	Primary, Replica *redisServer
	Sentinels        []*redisServer
}

// SentinelAddrs returns the Sentinels' addresses.
func (s *sentinelSet) SentinelAddrs() []string {
	var a []string
	for _, n := range s.Sentinels {
		a = append(a, n.Addr)
	}
	return a
}

// waitFor polls cond every 20ms until it holds or budget passes, then
// fails the test with what.
func waitFor(t testing.TB, budget time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(budget)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", budget, what)
		}
		time.Sleep(20 * time.Millisecond) // polling for an event of the servers
	}
}

// infoField returns field of INFO section on addr, or "".
func infoField(addr, section, field string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	return ""
}

// startSentinelSet starts a primary, one replica of it, and three Sentinels
// that fail the primary over 500ms after it stops answering, and waits
// until the Sentinels know the replica and each other.
func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	requireRedis(t)
	dir := t.TempDir()
	set := &sentinelSet{}
	var err error
	if set.Primary, err = startRedis(filepath.Join(dir, "primary"), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Primary.Stop)
	if set.Replica, err = startRedis(filepath.Join(dir, "replica"), false,
		"--replicaof", "127.0.0.1", strconv.Itoa(set.Primary.Port)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Replica.Stop)
	waitFor(t, 20*time.Second, "the replica's link to the primary is up", func() bool {
		return infoField(set.Replica.Addr, "replication", "master_link_status") == "up"
	})
	for i := range 3 {
		s, err := startSentinel(filepath.Join(dir, "sentinel"+strconv.Itoa(i)), set.Primary.Port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		set.Sentinels = append(set.Sentinels, s)
	}
	for _, s := range set.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		waitFor(t, 30*time.Second, "sentinel "+s.Addr+" knows the replica and the other sentinels", func() bool {
			ctx := context.Background()
			reps, err1 := c.Replicas(ctx, sentinelMaster).Result()
			sens, err2 := c.Sentinels(ctx, sentinelMaster).Result()
			return err1 == nil && err2 == nil && len(reps) == 1 && len(sens) == 2
		})
		c.Close()
	}
	return set
}

// startSentinel starts redis-server --sentinel monitoring the primary on
// port primary, with a quorum of 2 and short timeouts.
func startSentinel(dir string, primary int) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		port, err := freePort(false)
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		m := sentinelMaster
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n", port, dir, filepath.Join(dir, "redis.log")) +
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n", m, primary) +
			fmt.Sprintf("sentinel down-after-milliseconds %s 500\nsentinel failover-timeout %s 3000\n", m, m) +
			fmt.Sprintf("sentinel parallel-syncs %s 1\n", m)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		s := &redisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, dir: dir,
			args: []string{conf, "--sentinel"}}
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// masterAddr asks the Sentinels for the current primary's address: the
// answer of a majority, or "" while they disagree.
func (s *sentinelSet) masterAddr() string {
	votes := map[string]int{}
	for _, n := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		a, err := c.GetMasterAddrByName(context.Background(), sentinelMaster).Result()
		c.Close()
		if err == nil && len(a) == 2 {
			votes[a[0]+":"+a[1]]++
		}
	}
	for a, n := range votes {
		if n >= 2 {
			return a
		}
	}
	return ""
}

// replicaCluster is a Cluster of three primaries, each with one replica.
type replicaCluster struct {
	Nodes []*redisServer // primaries first, then replicas
}

// startReplicaCluster starts six cluster-enabled servers with a 1s node
// timeout, joins them with redis-cli --cluster create --cluster-replicas 1,
// and waits until every node reports cluster_state:ok and every replica's
// link is up.
func startReplicaCluster(t *testing.T) *replicaCluster {
	t.Helper()
	requireRedis(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &replicaCluster{}
	var addrs []string
	for i := range 6 {
		s, err := startRedis(filepath.Join(dir, "node"+strconv.Itoa(i)), true, "--cluster-node-timeout", "1000")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, lastLines(string(out), 5))
	}
	for _, n := range c.Nodes {
		waitFor(t, 30*time.Second, "cluster node "+n.Addr+" ok, replicas linked", func() bool {
			if infoField(n.Addr, "replication", "role") == "slave" &&
				infoField(n.Addr, "replication", "master_link_status") != "up" {
				return false
			}
			rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			defer rc.Close()
			info, err := rc.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	return c
}

// Addrs returns every node's address.
func (c *replicaCluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// node returns the node listening on addr.
func (c *replicaCluster) node(addr string) *redisServer {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}
