package redisstore

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// goroutinesSettle waits until runtime.NumGoroutine is back to base. The
// Sentinel tests pass allowSentinelPubSub: go-redis's failover client may
// leave a Sentinel subscription behind after Close (a sentinel client set
// up again by a dial that raced Close); those goroutines are go-redis's,
// logged and tolerated, and nothing else is. The wait is generous (a
// loaded machine can take seconds to run go-redis's last reload or dial to
// its end); a leak still fails, only later.
func goroutinesSettle(t *testing.T, base int, allowSentinelPubSub bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, pubsub, dump := runtime.NumGoroutine(), 0, ""
		if n <= base {
			t.Logf("goroutines back to %d (before: %d)", n, base)
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			dump = string(buf[:runtime.Stack(buf, true)])
			if allowSentinelPubSub {
				for _, g := range strings.Split(dump, "\n\n") {
					if strings.Contains(g, "go-redis/v9.(*channel)") || strings.Contains(g, "go-redis/v9.(*sentinelFailover).listen") {
						pubsub++
					}
				}
			}
			if n-pubsub <= base {
				t.Logf("goroutines: %d, %d before the test; the %d left are go-redis's Sentinel subscription, left by its failover client after Close", n, base, pubsub)
				return
			}
			t.Fatalf("goroutine leak: %d goroutines (%d of go-redis's Sentinel subscription), %d before the test:\n%s", n, pubsub, base, dump)
		}
		time.Sleep(20 * time.Millisecond) // polling for goroutines to exit
	}
}
