package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// startRedis starts a server for t, or skips t without redis-server (fails
// it when CI is set).
func startRedis(t *testing.T) *RedisServer {
	t.Helper()
	redistest.Require(t)
	srv, err := StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// TestRedisConfigurations runs every Redis limiter briefly on both paths:
// RunRedis checks distinct keys and the deny path before timing, and the
// decisions while timing.
func TestRedisConfigurations(t *testing.T) {
	srv := startRedis(t)
	for _, lib := range RedisLibraries() {
		for _, c := range []Case{{false, 100}, {true, 100}} {
			r, err := RunRedis(srv, lib, c, 8, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if r.Checks == 0 || r.Wrong != 0 || (r.Errors != 0 && lib.Name != "throttled") {
				t.Errorf("%s %v: %+v", lib.Name, c, r)
			}
			// Our default store answers a key it knows is denied locally.
			if (r.RTrips == 0 || r.Commands == 0) && !(lib.Name == "sluicehq" && c.Deny) {
				t.Errorf("%s %v: no round trips or commands counted: %+v", lib.Name, c, r)
			}
			t.Logf("%s %v: %.0f checks/s, %.2f round trips/check, %.2f commands/check", lib.Name, c, r.ChecksPerSec(), r.RoundTripsPerCheck(), r.CommandsPerCheck())
		}
	}
}
