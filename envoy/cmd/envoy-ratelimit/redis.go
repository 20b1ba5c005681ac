package main

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisClient makes the client the -redis flag names, with
// ContextTimeoutEnabled: a call's budget then bounds its socket reads and
// writes too, and the store needs no goroutine per call to keep it (see
// docs/redis.md):
//
//	host:port                               one server
//	redis://[user:pass@]host:port[/db]      one server, by URL (rediss:// for TLS)
//	cluster://host:port,host:port,...       Redis Cluster, from any of its nodes
//	sentinel://master@host:port,host:port   the primary named master, found by the Sentinels
func redisClient(addr string) (redis.UniversalClient, error) {
	switch {
	case strings.HasPrefix(addr, "cluster://"):
		nodes, err := hostPorts(strings.TrimPrefix(addr, "cluster://"))
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, ContextTimeoutEnabled: true}), nil
	case strings.HasPrefix(addr, "sentinel://"):
		master, rest, found := strings.Cut(strings.TrimPrefix(addr, "sentinel://"), "@")
		if !found || master == "" {
			return nil, fmt.Errorf("ratelimit: -redis %q: want sentinel://master@host:port,...", addr)
		}
		nodes, err := hostPorts(rest)
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: nodes, ContextTimeoutEnabled: true}), nil
	case strings.HasPrefix(addr, "redis://"), strings.HasPrefix(addr, "rediss://"):
		opts, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: -redis: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		return redis.NewClient(opts), nil
	}
	nodes, err := hostPorts(addr)
	if err != nil || len(nodes) != 1 {
		return nil, fmt.Errorf("ratelimit: -redis %q: want host:port, redis://, cluster:// or sentinel://", addr)
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}), nil
}

func hostPorts(list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if i := strings.LastIndexByte(a, ':'); i <= 0 || i == len(a)-1 {
			return nil, fmt.Errorf("ratelimit: -redis: %q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}
