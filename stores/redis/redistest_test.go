package redisstore

// Test servers: a standalone redis-server and a 3-master Cluster, started
// once per package by TestMain, plus helpers to start private ones.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is one redis-server process on a loopback port.
type redisServer struct {
	Addr string
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// redisBinary is the path of redis-server, or "" when it is not installed.
var redisBinary, _ = exec.LookPath("redis-server")

// errNoRedis explains why the Redis tests do not run.
var errNoRedis = errors.New("redis-server not found in PATH: install it (apt-get install redis-server) to run the Redis store tests")

// freePort returns a loopback port that is free, and whose Cluster bus port
// (port+10000) is free too when bus is set.
func freePort(bus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err == nil {
			l2.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// startRedis starts redis-server in dir with persistence off and waits
// until it answers PING. Extra arguments are passed through.
func startRedis(dir string, cluster bool, extra ...string) (*redisServer, error) {
	if redisBinary == "" {
		return nil, errNoRedis
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		port, err := freePort(cluster)
		if err != nil {
			return nil, err
		}
		s := &redisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, dir: dir}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"),
		}, extra...)
		if cluster {
			s.args = append(s.args, "--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000")
		}
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// Start (re)starts the server on its port and waits for PING.
func (s *redisServer) Start() error {
	s.cmd = exec.Command(redisBinary, s.args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(s.cmd, s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, lastLines(string(log), 5))
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling for the server to come up
	}
	s.Stop()
	return fmt.Errorf("redis-server on %s did not answer PING", s.Addr)
}

// Stop kills the server and waits for it to exit.
func (s *redisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startTestRedis starts a private standalone server for one test, in
// t.TempDir, stopped by t.Cleanup.
func startTestRedis(t *testing.T) *redisServer {
	t.Helper()
	requireRedis(t)
	s, err := startRedis(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// requireRedis skips the test when redis-server is missing, or fails it when
// the environment variable CI is set: CI must run these tests.
func requireRedis(t testing.TB) {
	t.Helper()
	if redisBinary != "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(errNoRedis)
	}
	t.Skip(errNoRedis)
}

// redisCluster is a Cluster of three masters and no replicas.
type redisCluster struct {
	Nodes []*redisServer
}

// startCluster starts three cluster-enabled servers under dir, joins them
// with redis-cli --cluster create, and waits for cluster_state:ok.
func startCluster(dir string) (*redisCluster, error) {
	c := &redisCluster{}
	addrs := make([]string, 3)
	for i := range 3 {
		d := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		s, err := startRedis(d, true)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
		addrs[i] = s.Addr
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		c.Stop()
		return nil, err
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, lastLines(string(out), 5))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := rc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				rc.Close()
				c.Stop()
				return nil, fmt.Errorf("cluster node %s not ok: %v %s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling for the cluster to converge
		}
		rc.Close()
	}
	return c, nil
}

// Addrs returns the nodes' addresses.
func (c *redisCluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// Stop stops every node.
func (c *redisCluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
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
