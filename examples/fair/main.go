// Command fair serves an API behind fair.Scheduler: at most 4 requests are
// served at once; the rest wait, fairly per tenant, in priority order
// (critical payments first, reports and test traffic last), and health
// checks are never held back. It needs no Redis.
//
//	go run ./examples/fair
package main

import (
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
	"github.com/sluicehq/ratelimit/fair"
)

func main() {
	ln, base := appserver.ListenFlag("localhost:8080")
	fmt.Printf(`Serving on %s (4 seats; every request takes 200ms)

A loud tenant and a quiet one, at the same time:
  for i in $(seq 200); do curl -s -o /dev/null -w "loud %%{http_code}\n" -H "X-Tenant: loud" %s/v1/items & done
  for i in $(seq 5); do curl -s -o /dev/null -w "quiet %%{http_code} %%{time_total}s\n" -H "X-Tenant: quiet" %s/v1/items; done
The quiet tenant is served within about a request's time; the loud one gets
429s (its queue is full) and 503s (no seat within 2s), with Retry-After.

Payments go first, test traffic last; health checks never wait:
  curl -i -X POST -H "X-Tenant: quiet" %s/v1/charges
  curl -i %s/healthz
`, base, base, base, base, base)
	log.Fatal(http.Serve(ln, newHandler(200*time.Millisecond)))
}

// newHandler returns the API, each request taking work, behind a fair.Scheduler.
func newHandler(work time.Duration) http.Handler {
	mux := http.NewServeMux()
	slow := func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(work)
		fmt.Fprintln(w, "done")
	}
	mux.HandleFunc("GET /v1/items", slow)
	mux.HandleFunc("POST /v1/charges", slow)
	mux.HandleFunc("GET /v1/reports", slow)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	// The tenant is the flow. Here a header a gateway in front would set;
	// in your server, the authenticated user or API key (ByUser, ByAPIKey).
	cfg := fair.Preset(4, ratelimit.ByHeader("X-Tenant"))
	cfg.MaxWait = 2 * time.Second
	cfg.Classify = classify
	return fair.New(cfg).Handler(mux)
}

// classify maps a request to a level of the preset. A client can only
// demote itself (test mode), never promote itself.
func classify(r *http.Request) string {
	switch {
	case r.URL.Path == "/healthz":
		return fair.LevelExempt
	case r.Header.Get("X-Test-Mode") != "":
		return fair.LevelTest
	case r.Method == http.MethodPost && r.URL.Path == "/v1/charges":
		return fair.LevelCritical
	case strings.HasPrefix(r.URL.Path, "/v1/reports"):
		return fair.LevelBatch
	}
	return fair.LevelInteractive
}
