// Command basic serves a small API with two rate limits: 60 requests per
// minute per client IP on everything, and 5 login attempts per minute per
// client IP on POST /login. It needs no Redis: limits live in memory.
//
//	go run ./examples/basic                  # on localhost:8080
//	go run ./examples/basic -addr :9090      # elsewhere
//
// It runs in the foreground: stop it with Ctrl-C.
package main

import (
	"fmt"
	"log"
	"net/http"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

func main() {
	ln, base := appserver.ListenFlag("localhost:8080")
	fmt.Printf(`Serving on %s

See the rate-limit headers:
  curl -i %s/api/items

Hit the login limit (the 6th attempt is a 429 with Retry-After):
  for i in $(seq 6); do curl -s -o /dev/null -w "%%{http_code}\n" -X POST %s/login; done
  curl -i -X POST %s/login

Health checks are never limited:
  curl -i %s/healthz

Stop the server with Ctrl-C.
`, base, base, base, base, base)
	log.Fatal(http.Serve(ln, newHandler()))
}

// newHandler returns the API with its two limits.
func newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `["apple","pear"]`)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok") // carved out: never limited
	})

	// A tighter limit on one route: 5 attempts per minute per IP.
	login := ratelimit.New(ratelimit.PerMinute(5), ratelimit.ByIP(), ratelimit.WithName("login"))
	mux.Handle("POST /login", login(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "wrong password", http.StatusUnauthorized)
	})))

	// A global limit on everything: 60 per minute per IP, bursts of 10.
	global := ratelimit.New(ratelimit.PerMinute(60).WithBurst(10), ratelimit.ByIP(), ratelimit.WithName("per-ip"))
	return global(mux)
}
