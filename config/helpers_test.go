package config_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// testRegistry has every name testdata/full.yaml uses; Redis is a memory
// store here.
func testRegistry(t testing.TB, clock ratelimit.Clock) *config.Registry {
	t.Helper()
	if clock == nil {
		clock = ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	}
	return &config.Registry{
		Keys: map[string]ratelimit.KeyFunc{
			"client_ip": ratelimit.ByIP(),
			"tenant":    ratelimit.ByHeader("X-Tenant"),
			"api_key":   ratelimit.ByHeader("X-API-Key"),
		},
		Stores: map[string]ratelimit.Store{
			"redis":  memory.New(memory.WithClock(clock)),
			"memory": memory.New(memory.WithClock(clock)),
		},
		Predicates: map[string]func(*http.Request) bool{
			"from_lb": func(r *http.Request) bool { return r.Header.Get("X-LB") == "1" },
		},
		Clock: clock,
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
