package ratelimitchi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitchi "github.com/sluicehq/ratelimit/adapters/chi"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func ok(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }

// get sends a GET for target from the default test peer.
func get(h http.Handler, target string) *ratelimittest.Response {
	return ratelimittest.Do(h, ratelimittest.NewRequest(http.MethodGet, target, ""))
}

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
			if resp := get(h, tt.target); resp.Code != http.StatusOK {
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
			resp := get(tt.build(mw), tt.target)
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
	return []ratelimit.Option{ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch))}
}

func TestPerRouteLimitsShareBucketByPattern(t *testing.T) {
	perRoute := ratelimit.New(ratelimit.PerMinute(2),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitchi.ByRoute()), newClockOpts()...)
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(perRoute)
		r.Get("/users/{id}", ok)
		r.Get("/items/{id}", ok)
	})
	// /users/1 and /users/2 share the /users/{id} bucket.
	for i, target := range []string{"/users/1", "/users/2"} {
		if resp := get(r, target); resp.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, resp.Code)
		}
	}
	if resp := get(r, "/users/3"); resp.Code != http.StatusTooManyRequests {
		t.Fatalf("third /users request: %d, want 429", resp.Code)
	}
	// Another route, another bucket; another client, another bucket.
	if resp := get(r, "/items/1"); resp.Code != http.StatusOK {
		t.Fatalf("/items/1: %d", resp.Code)
	}
	other := ratelimittest.NewRequest(http.MethodGet, "/users/1", "198.51.100.7:999")
	if resp := ratelimittest.Do(r, other); resp.Code != http.StatusOK {
		t.Fatalf("other client: %d", resp.Code)
	}
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

func TestCarveOuts(t *testing.T) {
	r := chi.NewRouter()
	r.Use(ratelimit.New(ratelimit.PerMinute(1), ratelimit.ByIP(), newClockOpts()...))
	r.Get("/healthz", ok)
	r.Get("/work", ok)
	get(r, "/work")
	if resp := get(r, "/work"); resp.Code != http.StatusTooManyRequests {
		t.Fatalf("/work: %d, want 429", resp.Code)
	}
	for range 3 {
		resp := get(r, "/healthz")
		if resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("/healthz: %d %v, want 200 without rate-limit fields", resp.Code, resp.Header)
		}
	}
}

// TestSameResponsesAsCore sends the same sequence through chi and through the
// core middleware on net/http, and compares status, headers and body.
func TestSameResponsesAsCore(t *testing.T) {
	for _, style := range []ratelimit.HeaderStyle{ratelimit.HeadersIETF, ratelimit.HeadersIETF | ratelimit.HeadersLegacy} {
		clockA := ratelimittest.NewClock(ratelimittest.Epoch)
		clockB := ratelimittest.NewClock(ratelimittest.Epoch)
		limit := ratelimit.PerMinute(3)
		core := ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithClock(clockA), ratelimit.WithHeaders(style))(http.HandlerFunc(ok))
		r := chi.NewRouter()
		r.With(ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithClock(clockB), ratelimit.WithHeaders(style))).Get("/x/{id}", ok)

		for i := range 8 {
			a := get(core, "/x/1")
			b := get(r, "/x/1")
			if a.Code != b.Code || a.Body != b.Body || fmt.Sprint(a.Header) != fmt.Sprint(b.Header) {
				t.Fatalf("request %d differs:\ncore %d %v %q\nchi  %d %v %q", i, a.Code, a.Header, a.Body, b.Code, b.Header, b.Body)
			}
			clockA.Advance(7_000_000_000)
			clockB.Advance(7_000_000_000)
		}
	}
}

var errDown = errors.New("backend down")

func TestStoreErrors(t *testing.T) {
	t.Run("FailOpen", func(t *testing.T) {
		r := chi.NewRouter()
		r.With(ratelimit.New(ratelimit.PerMinute(1), ratelimitchi.ByRoute(), ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown}))).Get("/x", ok)
		for range 3 {
			resp := get(r, "/x")
			if resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
				t.Fatalf("%d %v, want 200 without fields", resp.Code, resp.Header)
			}
		}
	})
	t.Run("FailClosed", func(t *testing.T) {
		var got error
		r := chi.NewRouter()
		r.With(ratelimit.New(ratelimit.PerMinute(1), ratelimitchi.ByRoute(), ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown}),
			ratelimit.WithFailurePolicy(ratelimit.FailClosed(http.StatusServiceUnavailable)),
			ratelimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			}))).Get("/x", ok)
		if resp := get(r, "/x"); resp.Code != http.StatusServiceUnavailable {
			t.Fatalf("%d, want 503", resp.Code)
		}
		if !errors.Is(got, errDown) {
			t.Fatalf("error handler got %v", got)
		}
	})
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

// TestConcurrencyReleases: chi uses the core middleware, which releases
// Concurrency slots when the handler returns.
func TestConcurrencyReleases(t *testing.T) {
	r := chi.NewRouter()
	inner := 0
	r.With(ratelimit.New(ratelimit.Limit{Rate: 1, Period: time.Minute}, ratelimitchi.ByRoute(),
		ratelimit.WithAlgorithm(ratelimit.Concurrency))).
		Get("/slow", func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Query().Get("nested") == "" {
				inner = get(r, "/slow?nested=1").Code
			}
		})
	if resp := get(r, "/slow"); resp.Code != http.StatusOK || inner != http.StatusTooManyRequests {
		t.Fatalf("outer %d, inner %d; want 200 and 429", resp.Code, inner)
	}
	if resp := get(r, "/slow?nested=1"); resp.Code != http.StatusOK {
		t.Fatalf("after the first request finished: %d, want 200", resp.Code)
	}
}
