package redistest

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestServerStopStartClose: a server answers, is down after Stop, answers
// again on the same port after Start, and Close removes the temporary
// directory StartServer made.
func TestServerStopStartClose(t *testing.T) {
	Require(t)
	s, err := StartServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil || s.Version == "" {
		t.Fatalf("ping: %v, version %q", err, s.Version)
	}
	s.Stop()
	if c.Ping(ctx).Err() == nil {
		t.Fatal("answers after Stop")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after Start: %v", err)
	}
	s.Close()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s left after Close: %v", s.dir, err)
	}
}

func TestNotRunLineNamesTheSuiteAndHowToRunIt(t *testing.T) {
	want := "!!! redisstore: THE REDIS STORE TESTS DID NOT RUN: redis-server is not in PATH. " +
		"Install it (apt-get install redis-server, brew install redis) and run go test ./stores/redis/... again; " +
		"with CI=true a missing redis-server fails the tests. !!!"
	if got := NotRunLine("redisstore", "REDIS STORE TESTS", "go test ./stores/redis/..."); got != want {
		t.Fatalf("got %q", got)
	}
}
