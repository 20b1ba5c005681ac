package ratelimitchi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
)

// A global limit in r.Use, a tighter limit on one route with r.With, and a
// per-client, per-route limit for a group with r.Group.
func Example() {
	r := chi.NewRouter()

	// Global: 100 requests a minute per client, for every route.
	r.Use(ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
		ratelimit.WithName("global")))

	// Per route: 2 login attempts a minute per client.
	r.With(ratelimit.New(ratelimit.PerMinute(2), ratelimit.ByIP(),
		ratelimit.WithName("login"))).
		Post("/login", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "welcome")
		})

	// Per group: each client gets 30 requests a minute on each route of the
	// group; /api/users/1 and /api/users/2 share the /api/users/{id} bucket.
	// ByRoute needs the middleware inside r.Group (or r.With), where chi
	// has matched the whole route.
	r.Route("/api", func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(ratelimit.New(ratelimit.PerMinute(30),
				ratelimit.Keys(ratelimit.ByIP(), ratelimitchi.ByRoute()),
				ratelimit.WithName("api")))
			r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "user", chi.URLParam(r, "id"))
			})
		})
	})

	// Each limiter a request passes reports its own policy in RateLimit.
	for range 3 {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
		fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/users/7", nil))
	fmt.Println(rec.Code, strings.Join(rec.Header().Values("RateLimit"), ", "))
	// Output:
	// 200 "global";r=99;t=1, "login";r=1;t=30
	// 200 "global";r=98;t=1, "login";r=0;t=30
	// 429 "global";r=97;t=1, "login";r=0;t=30
	// 200 "global";r=96;t=1, "api";r=29;t=2
}

// ByRoute in a group: every route of the group gets its own bucket, keyed by
// the pattern chi matched.
func ExampleByRoute() {
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(ratelimit.New(ratelimit.PerMinute(1), ratelimitchi.ByRoute()))
		r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {})
		r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {})
	})
	for _, path := range []string{"/users/1", "/users/2", "/items/1"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /users/1 200
	// /users/2 429
	// /items/1 200
}

// In r.Use of the top router chi has not matched a route yet: ByRoute
// refuses to guess, and the limiter's key-error policy answers 400.
func ExampleByRoute_wrongPlacement() {
	r := chi.NewRouter()
	r.Use(ratelimit.New(ratelimit.PerMinute(1), ratelimitchi.ByRoute())) // wrong place
	r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {})

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/users/1", nil))
	fmt.Println(rec.Code)
	// Output:
	// 400
}

// New decides carve-outs from chi's routes: GET /healthz is carved out
// because chi serves it from the /healthz route; /healthz/ and HEAD /healthz
// reach the catch-all and are limited like any other request.
func ExampleNew() {
	r := chi.NewRouter()
	r.Use(ratelimitchi.New(ratelimit.PerMinute(1), ratelimit.ByIP()))
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	r.HandleFunc("/*", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "app") })
	for _, req := range [][2]string{{"GET", "/"}, {"GET", "/healthz"}, {"GET", "/healthz/"}, {"HEAD", "/healthz"}} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(req[0], req[1], nil))
		fmt.Println(req[0], req[1], rec.Code)
	}
	// Output:
	// GET / 200
	// GET /healthz 200
	// GET /healthz/ 429
	// HEAD /healthz 429
}
