package bench

import (
	"bufio"
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
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server started for the benchmarks on a free
// loopback port, without persistence, in a temporary directory.
type RedisServer struct {
	Addr    string
	Version string
	cmd     *exec.Cmd
	dir     string
}

// RedisBinary is the redis-server the benchmarks start.
var RedisBinary = "redis-server"

// StartRedis starts a private redis-server on 127.0.0.1 and waits until it
// answers PING. Stop it with Stop.
func StartRedis() (*RedisServer, error) {
	bin, err := exec.LookPath(RedisBinary)
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			return nil, fmt.Errorf("redis-server not found: %w", err)
		}
		bin = "/usr/bin/redis-server"
	}
	dir, err := os.MkdirTemp("", "ratelimit-bench-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
		s.cmd = exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"), "--maxclients", "1000")
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		exited := make(chan struct{})
		go func() { s.cmd.Wait(); close(exited) }()
		if err := s.waitReady(exited); err == nil {
			return s, nil
		}
		s.cmd.Process.Kill()
		<-exited
	}
	os.RemoveAll(dir)
	return nil, errors.New("redis-server did not start")
}

func (s *RedisServer) waitReady(exited chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("redis-server exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			s.Version = infoField(info, "redis_version")
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("redis-server did not answer")
}

// Stop kills the server and removes its directory.
func (s *RedisServer) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		time.Sleep(50 * time.Millisecond)
	}
	os.RemoveAll(s.dir)
}

// Client returns a new client of the server with a pool of poolSize
// connections and a round-trip counter.
func (s *RedisServer) Client(poolSize int) (*redis.Client, *RoundTrips) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: poolSize, MinIdleConns: poolSize})
	rt := &RoundTrips{}
	c.AddHook(rt)
	return c, rt
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RoundTrips is a go-redis hook that counts round trips to the server: one
// per command sent alone, one per pipeline or transaction.
type RoundTrips struct{ n atomic.Int64 }

// Load returns the round trips counted so far.
func (rt *RoundTrips) Load() int64 { return rt.n.Load() }

// DialHook implements redis.Hook.
func (rt *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (rt *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connInit(cmd) {
			rt.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (rt *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if !connInit(c) {
				rt.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// connInit reports whether cmd is one go-redis sends when it opens a
// connection (HELLO, CLIENT SETINFO, ...): the pool's cost, not a check's.
func connInit(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping":
		return true
	}
	return false
}

// CommandCalls returns the number of commands the server executed, by
// command, from INFO commandstats (the INFO calls themselves excluded by the
// caller's deltas).
func CommandCalls(ctx context.Context, c redis.UniversalClient) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls, nil
}

// ServerCPU returns the CPU time the server has used (user + system), from
// INFO cpu.
func ServerCPU(ctx context.Context, c redis.UniversalClient) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", f, err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), nil
}

// ExpiredKeys returns how many keys the server has expired since it started.
func ExpiredKeys(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "expired_keys"), 10, 64)
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
