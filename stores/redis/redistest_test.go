package redisstore

// Test servers: a standalone redis-server and a 3-master Cluster, started
// once per package by TestMain, plus helpers to start private ones.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// The launcher is package redistest, shared with the bench module; these
// are this package's names for it.

type (
	redisServer  = redistest.Server
	redisCluster = redistest.Cluster
)

// redisBinary is the path of redis-server, or "" when it is not installed.
var redisBinary = redistest.Binary()

// startRedis starts redis-server in dir with persistence off and waits
// until it answers PING. Extra arguments are passed through.
func startRedis(dir string, cluster bool, extra ...string) (*redisServer, error) {
	return redistest.StartServer(redistest.Config{Dir: dir, Cluster: cluster, Args: extra})
}

// startTestRedis starts a private standalone server for one test, in
// t.TempDir, stopped by t.Cleanup.
func startTestRedis(t *testing.T) *redisServer { t.Helper(); return redistest.NewServer(t) }

// requireRedis skips the test when redis-server is missing, or fails it when
// the environment variable CI is set: CI must run these tests.
func requireRedis(t testing.TB) { t.Helper(); redistest.Require(t) }

// startCluster starts three cluster-enabled servers under dir, joins them
// with redis-cli --cluster create, and waits for cluster_state:ok.
func startCluster(dir string) (*redisCluster, error) {
	return redistest.StartCluster(redistest.ClusterConfig{Dir: dir})
}

// The shared servers of this package, started by TestMain.
var (
	sharedServer  *redisServer
	sharedServer2 *redisServer // a second standalone, for Ring tests
	sharedCluster *redisCluster
	sharedErr     error // why the shared servers are missing
)

// standaloneClient returns a new client of the shared standalone server,
// closed at the end of the test, or skips (fails on CI) without Redis.
func standaloneClient(t testing.TB) *redis.Client {
	t.Helper()
	requireShared(t)
	c := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterClient returns a new client of the shared Cluster.
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	requireShared(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sharedCluster.Addrs()})
	t.Cleanup(func() { c.Close() })
	return c
}

// ringClient returns a new Ring over the two shared standalone servers.
func ringClient(t testing.TB) *redis.Ring {
	t.Helper()
	requireShared(t)
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": sharedServer.Addr, "b": sharedServer2.Addr}})
	t.Cleanup(func() { c.Close() })
	return c
}

func requireShared(t testing.TB) {
	t.Helper()
	requireRedis(t)
	if sharedErr != nil {
		t.Fatalf("starting the test servers: %v", sharedErr)
	}
}

var prefixSeq atomic.Int64

// uniquePrefix returns a fresh key prefix, so that tests sharing a server
// never share state.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("rltest:%d:%s:", prefixSeq.Add(1), strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()))
}

// startShared starts the package's shared servers under dir.
func startShared(dir string) error {
	var err error
	if sharedServer, err = startRedis(filepath.Join(dir, "standalone"), false); err != nil {
		return err
	}
	if sharedServer2, err = startRedis(filepath.Join(dir, "standalone2"), false); err != nil {
		return err
	}
	sharedCluster, err = startCluster(filepath.Join(dir, "cluster"))
	return err
}

func stopShared() {
	for _, s := range []*redisServer{sharedServer, sharedServer2} {
		if s != nil {
			s.Stop()
		}
	}
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
}

// keysWithoutTTL scans every key of client and returns those whose PTTL is
// not positive (-1: no TTL), as "redis-cli --scan" and PTTL would.
func keysWithoutTTL(ctx context.Context, client redis.UniversalClient) ([]string, int, error) {
	var bad []string
	total := 0
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				return err
			}
			total++
			// -2: expired between SCAN and PTTL; 0: under 1ms left; -1:
			// no TTL at all, the one thing that must never happen.
			if ttl < 0 && ttl != -2 {
				bad = append(bad, fmt.Sprintf("%.80q (PTTL %v)", k, ttl))
			}
		}
		return iter.Err()
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		var mu chan struct{} = make(chan struct{}, 1)
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, n)
		})
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("unsupported client %T", client)
	}
	return bad, total, err
}
