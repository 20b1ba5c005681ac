// Command basic is the README's quick start, GET /hello limited to 100
// requests a minute per client IP in bursts of at most 20, with a tighter
// limit added on POST /login: 5 attempts a minute per client IP. It needs
// no Redis: limits live in memory.
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

The quick start's limit, 100 a minute in bursts of 20 (the 21st quick request is a 429):
  curl -i %s/hello
  for i in $(seq 21); do curl -s -o /dev/null -w "%%{http_code} " %s/hello; done; echo

The login limit, 5 a minute (the 6th attempt is a 429 with Retry-After):
  for i in $(seq 6); do curl -s -o /dev/null -w "%%{http_code} " -X POST %s/login; done; echo

Health checks are never limited:
  curl -i %s/healthz

Stop the server with Ctrl-C.
`, base, base, base, base, base)
	log.Fatal(http.Serve(ln, newHandler()))
}

// newHandler returns the quick start's server with the login limit added.
func newHandler(opts ...ratelimit.Option) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello\n")) })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "wrong password", http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok") // carved out: never limited
	})

	// Both limits are rules of one limiter, so they stack all-or-nothing:
	// a request passes only if both allow it, and a login attempt the login
	// rule denies costs nothing from the other. (Two limiters nested around
	// the mux would each count the request as it passes them.)
	limit := ratelimit.NewRules([]ratelimit.Rule{
		// The quick start's limit, named as there: "ip-100-per-1m-burst-20".
		{Limit: ratelimit.PerMinute(100).WithBurst(20), Key: ratelimit.ByIP()},
		// 5 attempts a minute per client IP, on the route POST /login only.
		{Name: "login", LimitFunc: onRoute(mux, "POST /login", ratelimit.PerMinute(5)), Key: ratelimit.ByIP()},
	}, opts...)
	return limit(mux)
}

// onRoute returns a LimitFunc that applies limit to the requests mux
// routes to pattern and exempts the others. It asks the mux itself, so a
// path the mux would serve from pattern ("/login" spelled "/%6Cogin", say)
// cannot escape the limit.
func onRoute(mux *http.ServeMux, pattern string, limit ratelimit.Limit) func(*http.Request) (ratelimit.Limit, bool) {
	return func(r *http.Request) (ratelimit.Limit, bool) {
		_, p := mux.Handler(r)
		return limit, p == pattern
	}
}
