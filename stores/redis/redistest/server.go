// Package redistest starts real redis-server processes for tests and
// benchmarks: a standalone server, a Cluster (with or without replicas) and
// a primary with a replica watched by Sentinels, each on free loopback
// ports, without persistence. The Redis store's tests and the bench module
// share it.
//
// Without redis-server, Require skips the test, or fails it when the
// environment variable CI is set; NotRunLine is the line a test binary
// prints so that a skipped Redis suite is not mistaken for a pass.
//
// A Server is not safe for concurrent Start and Stop; its fields are
// read-only once started.
package redistest

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
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled is the error when redis-server cannot be found.
var ErrNotInstalled = errors.New("redis-server not found in PATH: install it (apt-get install redis-server) to run the Redis store tests")

// Binary returns the path of redis-server (from PATH, else
// /usr/bin/redis-server), or "" when it is not installed.
func Binary() string { return binary }

var binary = func() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	return ""
}()

// Server is one redis-server process on a loopback port.
type Server struct {
	Addr    string // 127.0.0.1:port
	Port    int
	Version string // redis_version, read when it first answered
	dir     string
	temp    bool // dir is ours: Close removes it
	args    []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Config says how to start a Server.
type Config struct {
	// Dir holds the server's log (and Cluster config); "" makes a
	// temporary directory, removed by Close.
	Dir string
	// Cluster enables Cluster mode (node timeout 5000 ms), on a port whose
	// bus port (port+10000) is free too.
	Cluster bool
	// Args are more redis-server arguments, placed before the Cluster ones.
	Args []string
}

// StartServer starts redis-server with persistence off on a free loopback
// port (trying 3 ports) and waits until it answers PING.
func StartServer(cfg Config) (*Server, error) {
	if binary == "" {
		return nil, ErrNotInstalled
	}
	dir, temp, err := workDir(cfg.Dir, "redistest-")
	if err != nil {
		return nil, err
	}
	return startOnFreePort(dir, temp, cfg.Cluster, func(port int) ([]string, error) {
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"),
		}, cfg.Args...)
		if cfg.Cluster {
			args = append(args, "--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000")
		}
		return args, nil
	})
}

// workDir returns dir, made if missing, or with dir "" a new temporary
// directory named after pattern; temp reports the latter, which Close
// removes.
func workDir(dir, pattern string) (_ string, temp bool, _ error) {
	if dir == "" {
		d, err := os.MkdirTemp("", pattern)
		return d, err == nil, err
	}
	return dir, false, os.MkdirAll(dir, 0o755)
}

// startOnFreePort starts redis-server in dir with the arguments args
// returns for a free loopback port (whose bus port is free too if bus),
// trying 3 ports. On failure it removes dir if temp.
func startOnFreePort(dir string, temp, bus bool, args func(port int) ([]string, error)) (*Server, error) {
	var lastErr error
	for range 3 {
		port, err := FreePort(bus)
		if err != nil {
			lastErr = err
			break
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, dir: dir, temp: temp}
		if s.args, err = args(port); err != nil {
			lastErr = err
			break
		}
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	if temp {
		os.RemoveAll(dir)
	}
	return nil, lastErr
}

// Start (re)starts the server on its port and waits for PING, at most 10 s.
func (s *Server) Start() error {
	s.cmd = exec.Command(binary, s.args...)
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
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, LastLines(string(log), 5))
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			if s.Version == "" {
				s.Version = Info(s.Addr, "server", "redis_version")
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling for the server to come up
	}
	s.Stop()
	return fmt.Errorf("redis-server on %s did not answer PING", s.Addr)
}

// Stop kills the server (SIGKILL) and waits for it to exit. The server can
// be started again with Start.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Close stops the server and removes its directory if StartServer made it.
func (s *Server) Close() {
	s.Stop()
	if s.temp {
		os.RemoveAll(s.dir)
	}
}

// FreePort returns a free loopback port, whose Cluster bus port
// (port+10000) is free too when bus is set.
func FreePort(bus bool) (int, error) {
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

// Info returns field of INFO section on addr, or "" if it cannot be read.
func Info(addr, section, field string) string {
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

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
