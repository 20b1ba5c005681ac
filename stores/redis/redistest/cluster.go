package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of Primaries primaries, each with Replicas
// replicas, made by redis-cli --cluster create.
type Cluster struct {
	Nodes []*Server // as given to redis-cli: primaries first, then replicas
}

// ClusterConfig says how to start a Cluster.
type ClusterConfig struct {
	Dir       string // each node gets a directory node<i> under it; "" for temporary ones
	Primaries int    // 3 if 0
	Replicas  int    // replicas per primary
	// Args are more redis-server arguments for every node (placed before
	// the Cluster ones, so a --cluster-node-timeout here is overridden by
	// the default 5000).
	Args []string
}

// StartCluster starts the nodes, joins them with redis-cli --cluster
// create, and waits (at most 30 s per node) until every node reports
// cluster_state:ok and every replica's link to its primary is up. Stop it
// with Close.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Primaries == 0 {
		cfg.Primaries = 3
	}
	if binary == "" {
		return nil, ErrNotInstalled
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	n := cfg.Primaries * (1 + cfg.Replicas)
	for i := range n {
		dir := ""
		if cfg.Dir != "" {
			dir = filepath.Join(cfg.Dir, "node"+strconv.Itoa(i))
		}
		s, err := StartServer(Config{Dir: dir, Cluster: true, Args: cfg.Args})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.Replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, LastLines(string(out), 5))
	}
	for _, node := range c.Nodes {
		if err := waitNode(node.Addr); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// waitNode waits until the node at addr reports cluster_state:ok and, if
// it is a replica, its link is up.
func waitNode(addr string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		linked := Info(addr, "replication", "role") != "slave" || Info(addr, "replication", "master_link_status") == "up"
		info, err := rc.ClusterInfo(context.Background()).Result()
		if linked && err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster node %s not ok: %v %s", addr, err, info)
		}
		time.Sleep(50 * time.Millisecond) // polling for the cluster to converge
	}
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// Node returns the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Stop stops every node; Close also removes their temporary directories.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Close stops every node and removes the directories StartServer made.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}
