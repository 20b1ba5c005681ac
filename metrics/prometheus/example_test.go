package ratelimitprom_test

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func Example() {
	obs := ratelimitprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // carved out by default
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {})
	h := ratelimit.New(ratelimit.PerMinute(2), ratelimit.ByIP(),
		ratelimit.WithName("per-ip"),
		ratelimit.WithObserver(obs),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})), // for a deterministic example
	)(mux)

	for range 3 {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	text, _ := testutil.CollectAndFormat(obs, expfmt.TypeTextPlain, "ratelimit_decisions_total")
	os.Stdout.Write(text)
	// Output:
	// # HELP ratelimit_decisions_total Rate limit decisions, by rule, key kind and outcome.
	// # TYPE ratelimit_decisions_total counter
	// ratelimit_decisions_total{key_kind="ip",outcome="allowed",rule="per-ip"} 2
	// ratelimit_decisions_total{key_kind="ip",outcome="denied",rule="per-ip"} 1
}

func ExampleObserver_BreakerStateChange() {
	obs := ratelimitprom.New()

	var redisStore ratelimit.Store = failing{} // a stores/redis Store in real life
	store := breaker.New(redisStore, breaker.Config{
		OnStateChange: obs.BreakerStateChange("redis"),
	})
	_ = ratelimit.New(ratelimit.PerSecond(100), ratelimit.ByIP(),
		ratelimit.WithStore(store), ratelimit.WithObserver(obs))
	text, _ := testutil.CollectAndFormat(obs, expfmt.TypeTextPlain, "ratelimit_breaker_state")
	fmt.Printf("%s", text)
	// Output:
	// # HELP ratelimit_breaker_state State of a store circuit breaker: 0 closed, 1 open, 2 half-open.
	// # TYPE ratelimit_breaker_state gauge
	// ratelimit_breaker_state{name="redis"} 0
}
