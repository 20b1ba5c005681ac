package redistest

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// Require skips tb when redis-server is not installed, or fails it when
// the environment variable CI is set: CI must run the Redis tests.
func Require(tb testing.TB) {
	tb.Helper()
	if binary != "" {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatal(ErrNotInstalled)
	}
	tb.Skip(ErrNotInstalled)
}

// NewServer starts a standalone server for tb (see Require) in
// tb.TempDir, stopped by tb.Cleanup.
func NewServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return started(tb, func() (*Server, error) { return StartServer(Config{Dir: tb.TempDir(), Args: args}) })
}

// NewCluster starts a Cluster for tb (see Require), closed by tb.Cleanup.
func NewCluster(tb testing.TB, cfg ClusterConfig) *Cluster {
	tb.Helper()
	return started(tb, func() (*Cluster, error) {
		if cfg.Dir == "" {
			cfg.Dir = tb.TempDir()
		}
		return StartCluster(cfg)
	})
}

// NewSentinelSet starts a SentinelSet for tb (see Require), closed by
// tb.Cleanup.
func NewSentinelSet(tb testing.TB, master string) *SentinelSet {
	tb.Helper()
	return started(tb, func() (*SentinelSet, error) { return StartSentinelSet(tb.TempDir(), master) })
}

// started runs start for tb after Require, fails tb on its error, and
// closes what it started at tb's cleanup.
func started[T interface{ Close() }](tb testing.TB, start func() (T, error)) T {
	tb.Helper()
	Require(tb)
	v, err := start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(v.Close)
	return v
}

// WaitFor polls cond every 20 ms until it holds, and fails tb if budget
// passes first.
func WaitFor(tb testing.TB, budget time.Duration, what string, cond func() bool) {
	tb.Helper()
	if err := wait(budget, what, cond); err != nil {
		tb.Fatal(err)
	}
}

// NotRunLine is the line to print when a suite's Redis tests were skipped
// for want of redis-server: pkg and tests name them ("redisstore", "REDIS
// STORE TESTS"), how says how to run them.
func NotRunLine(pkg, tests, how string) string {
	return fmt.Sprintf("!!! %s: THE %s DID NOT RUN: redis-server is not in PATH. "+
		"Install it (apt-get install redis-server, brew install redis) and run %s again; "+
		"with CI=true a missing redis-server fails the tests. !!!", pkg, tests, how)
}

// Announce prints line on stderr, which go test shows with -v or when the
// package fails, and on the terminal, if there is one: go test hides the
// output of a passing package, and a skipped suite must not pass unnoticed.
func Announce(line string) {
	fmt.Fprintln(os.Stderr, line)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprintln(tty, line)
		tty.Close()
	}
}
