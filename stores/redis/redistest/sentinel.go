package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelSet is a primary, one replica of it, and three Sentinels
// (redis-server --sentinel, so only the redis-server binary is needed)
// that fail the primary over 500 ms after it stops answering.
type SentinelSet struct {
	Master           string // the name the Sentinels monitor
	Primary, Replica *Server
	Sentinels        []*Server
}

// StartSentinelSet starts the set under dir ("" for temporary
// directories) and waits (at most 20 s for the replica's link, 30 s for
// each Sentinel) until the Sentinels know the replica and each other.
func StartSentinelSet(dir, master string) (set *SentinelSet, err error) {
	set = &SentinelSet{Master: master}
	defer func() {
		if err != nil {
			set.Close()
		}
	}()
	sub := func(name string) string {
		if dir == "" {
			return ""
		}
		return filepath.Join(dir, name)
	}
	if set.Primary, err = StartServer(Config{Dir: sub("primary")}); err != nil {
		return set, err
	}
	if set.Replica, err = StartServer(Config{Dir: sub("replica"),
		Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(set.Primary.Port)}}); err != nil {
		return set, err
	}
	if err = wait(20*time.Second, "the replica's link to the primary is up", func() bool {
		return Info(set.Replica.Addr, "replication", "master_link_status") == "up"
	}); err != nil {
		return set, err
	}
	for i := range 3 {
		s, err := StartSentinel(sub("sentinel"+strconv.Itoa(i)), master, set.Primary.Port)
		if err != nil {
			return set, err
		}
		set.Sentinels = append(set.Sentinels, s)
	}
	for _, s := range set.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		err = wait(30*time.Second, "sentinel "+s.Addr+" knows the replica and the other sentinels", func() bool {
			ctx := context.Background()
			reps, err1 := c.Replicas(ctx, master).Result()
			sens, err2 := c.Sentinels(ctx, master).Result()
			return err1 == nil && err2 == nil && len(reps) == 1 && len(sens) == 2
		})
		c.Close()
		if err != nil {
			return set, err
		}
	}
	return set, nil
}

// StartSentinel starts redis-server --sentinel monitoring master, the
// primary on port primary, with a quorum of 2, down-after-milliseconds 500
// and failover-timeout 3000.
func StartSentinel(dir, master string, primary int) (*Server, error) {
	dir, temp, err := workDir(dir, "redistest-sentinel-")
	if err != nil {
		return nil, err
	}
	return startOnFreePort(dir, temp, false, func(port int) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		m := master
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n", port, dir, filepath.Join(dir, "redis.log")) +
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n", m, primary) +
			fmt.Sprintf("sentinel down-after-milliseconds %s 500\nsentinel failover-timeout %s 3000\n", m, m) +
			fmt.Sprintf("sentinel parallel-syncs %s 1\n", m)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel"}, nil
	})
}

// MasterAddr asks the Sentinels for the current primary's address: the
// answer of a majority, or "" while they disagree.
func (s *SentinelSet) MasterAddr() string {
	votes := map[string]int{}
	for _, n := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		a, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
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

// SentinelAddrs returns the Sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	var a []string
	for _, n := range s.Sentinels {
		a = append(a, n.Addr)
	}
	return a
}

// Close stops every process of the set and removes temporary directories.
func (s *SentinelSet) Close() {
	for _, n := range append([]*Server{s.Primary, s.Replica}, s.Sentinels...) {
		if n != nil {
			n.Close()
		}
	}
}

// wait polls cond every 20 ms until it holds, or fails after budget.
func wait(budget time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(budget)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %s", budget, what)
		}
		time.Sleep(20 * time.Millisecond) // polling for an event of the servers
	}
	return nil
}
