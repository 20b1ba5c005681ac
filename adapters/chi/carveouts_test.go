package ratelimitchi_test

import (
	"net/http"
	"testing"
	"testing/fstest"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// carveOutPaths are the default carve-outs and one next to a file server.
var carveOutPaths = append(ratelimit.DefaultCarveOuts(), "/public/status")

func servedBy(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimittest.ServedBy, name)
		w.Write([]byte(name))
	}
}

// exhaustible is 2 requests an hour for all clients together, reporting to
// p, on a clock that stands still.
func exhaustible(p *ratelimittest.CarveOutProber) *ratelimit.Limiter {
	return ratelimit.NewLimiter(ratelimit.PerHour(2), ratelimit.Global(),
		ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())),
		ratelimit.WithCarveOuts(carveOutPaths...), ratelimit.WithObserver(p))
}

func fileServer() http.Handler {
	fs := fstest.MapFS{"status": {Data: []byte("static")}, "status/index.html": {Data: []byte("dir")}}
	files := http.StripPrefix("/public/", http.FileServerFS(fs))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimittest.ServedBy, "/public/")
		files.ServeHTTP(w, r)
	})
}

// routes registers the carve-outs' own routes (each wrapped by with), a
// file server and catch-alls beside them.
func routes(r chi.Router, with func(http.Handler) http.Handler) {
	for _, p := range carveOutPaths {
		r.With(with).Get(p, servedBy(p))
	}
	r.With(with).Get("/healthz/", servedBy("/healthz/"))
	r.With(with).Handle("/public/*", fileServer())
	r.With(with).Post("/metrics", servedBy("POST /metrics"))
	r.With(with).HandleFunc("/*", servedBy("/*"))
}

func none(h http.Handler) http.Handler { return h }

func TestCarveOutsNeverBypassChi(t *testing.T) {
	apps := map[string]func(p *ratelimittest.CarveOutProber) http.Handler{
		"adapter in r.Use": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			r.Use(ratelimitchi.Middleware(exhaustible(p)))
			routes(r, none)
			return r
		},
		"adapter in r.Use after StripSlashes": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			r.Use(middleware.StripSlashes, ratelimitchi.Middleware(exhaustible(p)))
			routes(r, none)
			return r
		},
		"adapter in r.With": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			routes(r, ratelimitchi.Middleware(exhaustible(p)))
			return r
		},
		"adapter around a mounted router": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			r.Use(ratelimitchi.Middleware(exhaustible(p)))
			sub := chi.NewRouter()
			routes(sub, none)
			r.Mount("/", sub)
			return r
		},
		"core in r.Use": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			r.Use(exhaustible(p).Handler)
			routes(r, none)
			return r
		},
		"core in r.With": func(p *ratelimittest.CarveOutProber) http.Handler {
			r := chi.NewRouter()
			routes(r, exhaustible(p).Handler)
			return r
		},
	}
	for name, app := range apps {
		t.Run(name, func(t *testing.T) {
			p := new(ratelimittest.CarveOutProber)
			skipped := p.Check(t, app(p), carveOutPaths...)
			if skipped[ratelimittest.Probe{Method: "HEAD", Target: "/healthz"}] {
				t.Error("HEAD /healthz skipped: chi serves it from /*, not from the GET route")
			}
		})
	}
}

func TestCarveOutWithoutItsRouteIsLimited(t *testing.T) {
	mws := map[string]func(*ratelimit.Limiter) func(http.Handler) http.Handler{
		"adapter": ratelimitchi.Middleware,
		"core":    func(l *ratelimit.Limiter) func(http.Handler) http.Handler { return l.Handler },
	}
	for name, mw := range mws {
		t.Run(name, func(t *testing.T) {
			p := new(ratelimittest.CarveOutProber)
			l := exhaustible(p)
			r := chi.NewRouter()
			// No /healthz route: an SPA fallback; and a "/metrics/" route,
			// which chi reports as the pattern "/metrics".
			r.With(mw(l)).HandleFunc("/*", servedBy("/*"))
			r.With(mw(l)).Get("/metrics/", servedBy("/metrics/"))
			for range 3 {
				ratelimittest.Get(r, "/api")
			}
			for _, target := range []string{"/healthz", "/metrics/"} {
				for _, m := range []string{"GET", "HEAD"} {
					if resp := ratelimittest.Do(r, ratelimittest.NewRequest(m, target, "")); !resp.Limited() {
						t.Errorf("%s %s: status %d served by %q: skipped though no carve-out route serves it", m, target, resp.Code, resp.Header.Get(ratelimittest.ServedBy))
					}
				}
			}
		})
	}
	t.Run("adapter in r.Use", func(t *testing.T) {
		p := new(ratelimittest.CarveOutProber)
		r := chi.NewRouter()
		r.Use(ratelimitchi.Middleware(exhaustible(p)))
		r.HandleFunc("/*", servedBy("/*"))
		for range 3 {
			ratelimittest.Get(r, "/api")
		}
		if resp := ratelimittest.Get(r, "/healthz"); !resp.Limited() {
			t.Errorf("GET /healthz: status %d served by %q, want limited", resp.Code, resp.Header.Get(ratelimittest.ServedBy))
		}
	})
}

func TestMiddlewareNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		}
	}()
	ratelimitchi.Middleware(nil)
}
