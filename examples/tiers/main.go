// Command tiers serves a multi-tenant API with three plans. Each tenant's
// plan, looked up from its API key, sets a rate with a burst, a daily quota
// and a cap on requests in flight; a per-IP rule protects the whole service.
// Decisions are exported as Prometheus metrics on /metrics, which, like
// /healthz, is never limited. Limits live in memory: no Redis needed.
//
//	go run ./examples/tiers
package main

import (
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
	ratelimitprom "github.com/sluicehq/ratelimit/metrics/prometheus"
	"github.com/sluicehq/ratelimit/tiers"
)

// plans are what each tier grants a tenant.
var plans = map[string]tiers.Plan{
	"free": {
		Rate:        ratelimit.PerMinute(60).WithBurst(10),
		Quota:       ratelimit.Daily(1_000, nil), // calendar days, UTC
		Concurrency: 2,
	},
	"standard": {
		Rate:        ratelimit.PerMinute(600).WithBurst(50),
		Quota:       ratelimit.Daily(50_000, nil),
		Concurrency: 10,
	},
	"enterprise": {
		Rate:        ratelimit.PerMinute(6_000).WithBurst(500),
		Quota:       ratelimit.Daily(1_000_000, nil),
		Concurrency: 50,
	},
}

// tenant is a customer account. A real service would look API keys up in
// its database (and store them hashed); this table stands in for it.
type tenant struct{ id, plan string }

var tenants = map[string]tenant{
	"free-key-1":       {id: "bob", plan: "free"},
	"standard-key-2":   {id: "acme", plan: "standard"},
	"enterprise-key-3": {id: "globex", plan: "enterprise"},
}

func lookup(r *http.Request) (tenant, bool) {
	t, ok := tenants[r.Header.Get("X-API-Key")]
	return t, ok
}

func main() {
	// Metrics: one Observer, registered once, shared by every limiter.
	h := newHandler(prometheus.DefaultRegisterer, prometheus.DefaultGatherer)

	ln, base := appserver.ListenFlag("localhost:8080")
	fmt.Printf(`Serving on %[1]s. API keys: free-key-1, standard-key-2, enterprise-key-3.

A tenant's limits are in the RateLimit-Policy header:
  curl -i -H 'X-API-Key: standard-key-2' %[1]s/api/hello

The free plan has 2 requests in flight at most: the third export is a 429.
  for i in 1 2 3; do curl -s -o /dev/null -w '%%{http_code}\n' -H 'X-API-Key: free-key-1' %[1]s/api/export & done; wait

The free plan allows bursts of 10, then one request a second: the rest are 429s.
  for i in $(seq 12); do curl -s -o /dev/null -w '%%{http_code} ' -H 'X-API-Key: free-key-1' %[1]s/api/hello; done; echo

No key, or an unknown one, is a 401:
  curl -i %[1]s/api/hello

The decisions, by rule and outcome (never limited):
  curl -s %[1]s/metrics | grep ^ratelimit_
`, base)
	log.Fatal(http.Serve(ln, h))
}

// newHandler returns the API with its limits, registering the limiter's
// metrics on reg and serving gather's on /metrics.
func newHandler(reg prometheus.Registerer, gather prometheus.Gatherer) http.Handler {
	metrics := ratelimitprom.New()
	reg.MustRegister(metrics)

	// The tenant's id keys its buckets; its plan picks their limits. An
	// unknown or missing API key fails the key: a 401, never unlimited.
	tenantID := ratelimit.ByUser(func(r *http.Request) (string, bool) {
		t, ok := lookup(r)
		return t.id, ok
	})
	planOf := func(r *http.Request) (string, bool) {
		t, ok := lookup(r)
		return t.plan, ok
	}
	rules := append(tiers.Rules("plan", tenantID, planOf, plans),
		// Whatever the plan, one address gets at most 20 requests per second.
		ratelimit.Rule{Name: "per-ip", Limit: ratelimit.PerSecond(20).WithBurst(40), Key: ratelimit.ByIP(), KeyKind: "ip"},
	)
	limit := ratelimit.NewRules(rules,
		ratelimit.WithObserver(metrics),
		ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: http.StatusUnauthorized}),
	)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/hello", func(w http.ResponseWriter, r *http.Request) {
		t, _ := lookup(r)
		fmt.Fprintf(w, "hello %s (%s plan)\n", t.id, t.plan)
	})
	mux.HandleFunc("GET /api/export", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * time.Second) // a slow request holds a concurrency slot
		fmt.Fprintln(w, "export done")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{})) // carved out by default
	return limit(mux)
}
