package ratelimitchi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func ok(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }

func TestByRouteWorkingPlacements(t *testing.T) {
	tests := []struct {
		name   string
		build  func(mw func(http.Handler) http.Handler) http.Handler
		target string
		want   string
	}{
		{"With", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Get("/users/{id}", ok)
			return r
		}, "/users/42", "/users/{id}"},
		{"Group", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Group(func(r chi.Router) {
				r.Use(mw)
				r.Get("/users/{id}", ok)
			})
			return r
		}, "/users/42", "/users/{id}"},
		{"GroupInsideRoute", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.Group(func(r chi.Router) {
					r.Use(mw)
					r.Get("/users/{id}", ok)
				})
			})
			return r
		}, "/api/users/42", "/api/users/{id}"},
		{"WithInsideNestedRoutes", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.Route("/v1", func(r chi.Router) {
					r.With(mw).Get("/orgs/{org}/repos/{repo}", ok)
				})
			})
			return r
		}, "/api/v1/orgs/a/repos/b", "/api/v1/orgs/{org}/repos/{repo}"},
		{"WildcardRoute", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Get("/files/*", ok)
			return r
		}, "/files/a/b.txt", "/files/*"},
		{"WildcardRouteEmptyRest", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.With(mw).Get("/files/*", ok)
			})
			return r
		}, "/api/files/", "/api/files/*"},
		{"WithMountOfPlainHandler", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Mount("/static", http.HandlerFunc(ok))
			return r
		}, "/static/css/app.css", "/static/*"},
		{"SubrouterRouteInGroup", func(mw func(http.Handler) http.Handler) http.Handler {
			sub := chi.NewRouter()
			sub.Group(func(r chi.Router) {
				r.Use(mw)
				r.Get("/*", ok)
			})
			r := chi.NewRouter()
			r.Mount("/blob", sub)
			return r
		}, "/blob/x/y", "/blob/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rk ratelimittest.KeyRecorder
			mw := ratelimit.New(ratelimit.PerMinute(2), rk.Wrap(ratelimitchi.ByRoute()))
			h := tt.build(mw)
			if resp := ratelimittest.Get(h, tt.target); resp.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tt.target, resp.Code, resp.Body)
			}
			key, err := rk.MustLast(t)
			if err != nil || key != tt.want {
				t.Fatalf("key = %q, %v; want %q", key, err, tt.want)
			}
		})
	}
}

func TestByRouteBrokenPlacements(t *testing.T) {
	tests := []struct {
		name   string
		build  func(mw func(http.Handler) http.Handler) http.Handler
		target string
	}{
		{"TopLevelUse", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(mw)
			r.Get("/users/{id}", ok)
			return r
		}, "/users/42"},
		{"UseInsideRoute", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.Use(mw)
				r.Get("/users/{id}", ok)
			})
			return r
		}, "/api/users/42"},
		{"UseInsideNestedRoute", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.Route("/v1", func(r chi.Router) {
					r.Use(mw)
					r.Get("/users/{id}", ok)
				})
			})
			return r
		}, "/api/v1/users/42"},
		{"UseOnMountedRouter", func(mw func(http.Handler) http.Handler) http.Handler {
			sub := chi.NewRouter()
			sub.Use(mw)
			sub.Get("/users/{id}", ok)
			r := chi.NewRouter()
			r.Mount("/api", sub)
			return r
		}, "/api/users/42"},
		{"WithRoute", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Route("/api", func(r chi.Router) {
				r.Get("/users/{id}", ok)
			})
			return r
		}, "/api/users/42"},
		{"OutsideChi", func(mw func(http.Handler) http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.HandleFunc("/users/{id}", ok)
			return mw(mux)
		}, "/users/42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rk ratelimittest.KeyRecorder
			mw := ratelimit.New(ratelimit.PerMinute(2), rk.Wrap(ratelimitchi.ByRoute()))
			resp := ratelimittest.Get(tt.build(mw), tt.target)
			if resp.Code != http.StatusBadRequest {
				t.Errorf("GET %s: %d, want 400 (the default key-error policy)", tt.target, resp.Code)
			}
			key, err := rk.MustLast(t)
			if key != "" || !errors.Is(err, ratelimit.ErrNoKey) || !errors.Is(err, ratelimitchi.ErrNotRouted) {
				t.Errorf("key = %q, %v; want an ErrNotRouted error", key, err)
			}
		})
	}
}

func TestByRouteHandBuiltContext(t *testing.T) {
	rctx := chi.NewRouteContext()
	rctx.RoutePatterns = []string{"/api/*", "/users/{id}"}
	r := ratelimittest.NewRequest(http.MethodGet, "/api/users/1", "")
	r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	key, err := ratelimitchi.ByRoute()(r)
	if err != nil || key != "/api/users/{id}" {
		t.Fatalf("key = %q, %v", key, err)
	}
}

// newClockOpts returns options making a limiter deterministic.
func newClockOpts() []ratelimit.Option {
	return []ratelimit.Option{ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch()))}
}

func TestGlobalGroupAndRouteLimitsNest(t *testing.T) {
	opts := newClockOpts()
	r := chi.NewRouter()
	r.Use(ratelimit.New(ratelimit.PerMinute(10), ratelimit.ByIP(), append(opts, ratelimit.WithName("global"))...))
	r.With(ratelimit.New(ratelimit.PerMinute(2), ratelimit.ByIP(), append(opts, ratelimit.WithName("login"))...)).
		Post("/login", ok)
	r.Route("/api", func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(ratelimit.New(ratelimit.PerMinute(5), ratelimit.ByIP(), append(opts, ratelimit.WithName("api"))...))
			r.Get("/things", ok)
		})
	})
	r.Get("/", ok)

	post := func() *http.Request { return ratelimittest.NewRequest(http.MethodPost, "/login", "") }
	n, resp := ratelimittest.FirstLimited(r, 10, post)
	if n != 3 {
		t.Fatalf("login limited at request %d, want 3", n)
	}
	if !strings.Contains(resp.Body, `"login"`) {
		t.Errorf("429 body does not name the login policy: %s", resp.Body)
	}
	n, resp = ratelimittest.FirstLimited(r, 10, func() *http.Request {
		return ratelimittest.NewRequest(http.MethodGet, "/api/things", "")
	})
	// 3 login requests were counted globally (the third was denied by the
	// login rule, after the global one consumed).
	if n != 6 || !strings.Contains(resp.Body, `"api"`) {
		t.Fatalf("api limited at request %d (%s), want 6 by the api policy", n, resp.Body)
	}
	n, resp = ratelimittest.FirstLimited(r, 10, func() *http.Request {
		return ratelimittest.NewRequest(http.MethodGet, "/", "")
	})
	// The global rule has counted 3 + 6 requests: the 10th is its last.
	if n != 2 || !strings.Contains(resp.Body, `"global"`) {
		t.Fatalf("/ limited at request %d, want 2 by the global policy", n)
	}
}

func BenchmarkAllow(b *testing.B) {
	for _, bm := range []struct {
		name string
		key  ratelimit.KeyFunc
	}{
		{"ByIP", ratelimit.ByIP()},
		{"ByRoute", ratelimitchi.ByRoute()},
		{"ByIPAndRoute", ratelimit.Keys(ratelimit.ByIP(), ratelimitchi.ByRoute())},
	} {
		b.Run(bm.name, func(b *testing.B) {
			r := chi.NewRouter()
			r.With(ratelimit.New(ratelimit.PerSecond(1e9), bm.key)).Get("/users/{id}", ok)
			benchServe(b, r)
		})
	}
	b.Run("NoLimiter", func(b *testing.B) {
		r := chi.NewRouter()
		r.Get("/users/{id}", ok)
		benchServe(b, r)
	})
	// A pattern ending in "*" costs a lookup in the mount cache.
	b.Run("ByRouteWildcard", func(b *testing.B) {
		r := chi.NewRouter()
		r.Route("/users", func(r chi.Router) {
			r.With(ratelimit.New(ratelimit.PerSecond(1e9), ratelimitchi.ByRoute())).Get("/*", ok)
		})
		benchServe(b, r)
	})
	b.Run("WildcardNoLimiter", func(b *testing.B) {
		r := chi.NewRouter()
		r.Route("/users", func(r chi.Router) { r.Get("/*", ok) })
		benchServe(b, r)
	})
}

func benchServe(b *testing.B, h http.Handler) {
	req := ratelimittest.NewRequest(http.MethodGet, "/users/1", "")
	w := ratelimittest.NewDiscardWriter()
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		h.ServeHTTP(w, req)
	}
}

// TestSettledCostReachesTheLimiter: under a settled limiter (estimate 1) a
// handler that settles 10 units is charged 10: the next response's
// RateLimit shows both requests' units. Carve-outs still hold.
func TestSettledCostReachesTheLimiter(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	r := chi.NewRouter()
	r.Use(ratelimitchi.Middleware(ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock))))
	r.Get("/healthz", func(http.ResponseWriter, *http.Request) {})
	r.Get("/", func(w http.ResponseWriter, req *http.Request) {
		if !ratelimit.Settle(req.Context(), w, 10) {
			t.Error("Settle found no settled rule in the handler's context")
		}
	})
	ratelimittest.Do(r, ratelimittest.NewRequest("GET", "/", ""))
	if resp := ratelimittest.Do(r, ratelimittest.NewRequest("GET", "/healthz", "")); resp.Header.Get("RateLimit") != "" {
		t.Fatalf("a carve-out got rate-limit fields: %v", resp.Header)
	}
	resp := ratelimittest.Do(r, ratelimittest.NewRequest("GET", "/", ""))
	f, err := ratelimittest.ParseRateLimit(resp.Header)
	if err != nil || f.Remaining != 100-10-1 {
		t.Fatalf("second response: %+v, %v; want Remaining 89 (the first request charged 10)", f, err)
	}
}
