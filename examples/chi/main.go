// Command chi serves a chi app limited with github.com/sluicehq/ratelimit: a
// global limit per client, a tighter limit on POST /login, and a
// per-client, per-route limit on the /api group.
//
//	go run ./examples/chi            # from the repository root
//	go run ./examples/chi -addr localhost:9000
package main

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

func main() {
	appserver.Main("chi", "localhost:8081", newHandler())
}

// newHandler returns the app with its limits.
func newHandler() http.Handler {
	r := chi.NewRouter()

	// Global: 30 requests a minute per client IP, on every route. /healthz
	// is carved out by default.
	r.Use(ratelimit.New(ratelimit.PerMinute(30), ratelimit.ByIP(), ratelimit.WithName("global")))

	r.Get("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello from chi") })
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	// Per route: 3 login attempts a minute per client IP.
	r.With(ratelimit.New(ratelimit.PerMinute(3), ratelimit.ByIP(), ratelimit.WithName("login"))).
		Post("/login", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "welcome") })

	// Per group, per route: 5 requests a minute per client and route.
	// ByRoute needs the middleware inside r.Group (or r.With), where chi has
	// matched the whole route; /api/users/1 and /api/users/2 share a bucket.
	r.Route("/api", func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(ratelimit.New(ratelimit.PerMinute(5),
				ratelimit.Keys(ratelimit.ByIP(), ratelimitchi.ByRoute()), ratelimit.WithName("api")))
			r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "user", chi.URLParam(r, "id"))
			})
			r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "item", chi.URLParam(r, "id"))
			})
		})
	})

	return r
}
