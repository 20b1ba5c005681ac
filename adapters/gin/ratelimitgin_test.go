package ratelimitgin_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

func ok(c *gin.Context) { c.String(http.StatusOK, "ok") }

func clock() ratelimit.Option {
	return ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch()))
}

func TestByRouteEveryPlacement(t *testing.T) {
	tests := []struct {
		name   string
		build  func(mw gin.HandlerFunc) *gin.Engine
		target string
		want   string
	}{
		{"Engine", func(mw gin.HandlerFunc) *gin.Engine {
			r := gin.New()
			r.Use(mw)
			r.GET("/users/:id", ok)
			return r
		}, "/users/42", "/users/:id"},
		{"Group", func(mw gin.HandlerFunc) *gin.Engine {
			r := gin.New()
			api := r.Group("/api", mw)
			api.GET("/users/:id", ok)
			return r
		}, "/api/users/42", "/api/users/:id"},
		{"NestedGroup", func(mw gin.HandlerFunc) *gin.Engine {
			r := gin.New()
			v1 := r.Group("/api").Group("/v1")
			v1.Use(mw)
			v1.GET("/files/*path", ok)
			return r
		}, "/api/v1/files/a/b", "/api/v1/files/*path"},
		{"Route", func(mw gin.HandlerFunc) *gin.Engine {
			r := gin.New()
			r.GET("/users/:id", mw, ok)
			return r
		}, "/users/42", "/users/:id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rk ratelimittest.KeyRecorder
			h := tt.build(ratelimitgin.New(ratelimit.PerMinute(5), rk.Wrap(ratelimitgin.ByRoute())))
			if resp := ratelimittest.Get(h, tt.target); resp.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tt.target, resp.Code, resp.Body)
			}
			if key, err := rk.MustLast(t); err != nil || key != tt.want {
				t.Fatalf("key = %q, %v; want %q", key, err, tt.want)
			}
			// The core's ByRoute sees the same pattern.
			var core ratelimittest.KeyRecorder
			h = tt.build(ratelimitgin.New(ratelimit.PerMinute(5), core.Wrap(ratelimit.ByRoute())))
			ratelimittest.Get(h, tt.target)
			if key, err := core.MustLast(t); err != nil || key != tt.want {
				t.Fatalf("ratelimit.ByRoute: key = %q, %v; want %q", key, err, tt.want)
			}
		})
	}
}

func TestByRouteNoRoute(t *testing.T) {
	var rk ratelimittest.KeyRecorder
	r := gin.New()
	r.Use(ratelimitgin.New(ratelimit.PerMinute(5), rk.Wrap(ratelimitgin.ByRoute())))
	r.GET("/users/:id", ok)
	if resp := ratelimittest.Get(r, "/nowhere"); resp.Code != http.StatusBadRequest {
		t.Fatalf("unmatched route: %d, want 400 (the default key-error policy)", resp.Code)
	}
	if key, err := rk.MustLast(t); key != "" || !errors.Is(err, ratelimit.ErrNoKey) {
		t.Fatalf("key = %q, %v; want ErrNoKey", key, err)
	}
	// Outside this package's middleware there is no pattern either.
	req := ratelimittest.NewRequest(http.MethodGet, "/users/1", "")
	if _, err := ratelimitgin.ByRoute()(req); !errors.Is(err, ratelimit.ErrNoKey) {
		t.Fatalf("bare request: %v", err)
	}
}

func TestPerRouteAndGroupLimits(t *testing.T) {
	r := gin.New()
	r.Use(ratelimitgin.New(ratelimit.PerMinute(20), ratelimit.ByIP(), clock(), ratelimit.WithName("global")))
	r.POST("/login", ratelimitgin.New(ratelimit.PerMinute(2), ratelimit.ByIP(), clock(), ratelimit.WithName("login")), ok)
	api := r.Group("/api", ratelimitgin.New(ratelimit.PerMinute(3),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()), clock(), ratelimit.WithName("api")))
	api.GET("/users/:id", ok)
	api.GET("/items/:id", ok)

	n, resp := ratelimittest.FirstLimited(r, 10, func() *http.Request {
		return ratelimittest.NewRequest(http.MethodPost, "/login", "")
	})
	if n != 3 || !strings.Contains(resp.Body, `"login"`) {
		t.Fatalf("login limited at %d (%v), want 3 by the login policy", n, resp)
	}
	// /api/users/1, /2, /3 share the /api/users/:id bucket.
	for i := 1; i <= 3; i++ {
		if resp := ratelimittest.Get(r, fmt.Sprint("/api/users/", i)); resp.Code != http.StatusOK {
			t.Fatalf("user %d: %d", i, resp.Code)
		}
	}
	resp = ratelimittest.Get(r, "/api/users/4")
	if resp.Code != http.StatusTooManyRequests || !strings.Contains(resp.Body, `"api"`) {
		t.Fatalf("4th user request: %d %s, want 429 by the api policy", resp.Code, resp.Body)
	}
	if resp := ratelimittest.Get(r, "/api/items/1"); resp.Code != http.StatusOK {
		t.Fatalf("items: %d, want its own bucket", resp.Code)
	}
}

func TestDeniedHandler(t *testing.T) {
	r := gin.New()
	r.GET("/x", ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), clock(),
		ratelimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, v *ratelimit.Verdict) {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, "slow down (%s)", v.Rule())
		})), ok)
	ratelimittest.Get(r, "/x")
	resp := ratelimittest.Get(r, "/x")
	if resp.Code != http.StatusTooManyRequests || resp.Body != "slow down (ip-1-per-1m)" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %q %v", resp.Code, resp.Body, resp.Header)
	}
}

func TestMiddlewareNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "ratelimitgin:") {
			t.Fatalf("recovered %v", r)
		}
	}()
	ratelimitgin.Middleware(nil)
}

func BenchmarkAllow(b *testing.B) {
	for _, bm := range []struct {
		name string
		key  ratelimit.KeyFunc
	}{
		{"ByIP", ratelimit.ByIP()},
		{"ByRoute", ratelimitgin.ByRoute()},
		{"ByIPAndRoute", ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute())},
	} {
		b.Run(bm.name, func(b *testing.B) {
			r := gin.New()
			r.GET("/users/:id", ratelimitgin.New(ratelimit.PerSecond(1e9), bm.key), func(*gin.Context) {})
			benchServe(b, r)
		})
	}
	b.Run("NoLimiter", func(b *testing.B) {
		r := gin.New()
		r.GET("/users/:id", func(*gin.Context) {})
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

// TestSettledCostReachesTheLimiter: a handler that settles 10 units under a
// settled limiter (estimate 1) is charged 10, with Middleware and with a
// DenyHandler: the next response's RateLimit shows both requests' units.
func TestSettledCostReachesTheLimiter(t *testing.T) {
	builds := map[string]func(opts ...ratelimit.Option) gin.HandlerFunc{
		"Middleware": func(opts ...ratelimit.Option) gin.HandlerFunc {
			return ratelimitgin.Middleware(ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, opts...))
		},
		"NewWithConfig": func(opts ...ratelimit.Option) gin.HandlerFunc {
			return ratelimitgin.NewWithConfig(ratelimitgin.Config{Rules: []ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}},
				Options: opts, DenyHandler: func(c *gin.Context, _ *ratelimit.Verdict) { c.Status(http.StatusTooManyRequests) }})
		},
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			r := gin.New()
			r.Use(build(clock()))
			r.GET("/", func(c *gin.Context) {
				if !ratelimit.Settle(c.Request.Context(), c.Writer, 10) {
					t.Error("Settle found no settled rule in the handler's context")
				}
				c.Status(http.StatusOK)
			})
			ratelimittest.Do(r, ratelimittest.NewRequest("GET", "/", ""))
			resp := ratelimittest.Do(r, ratelimittest.NewRequest("GET", "/", ""))
			f, err := ratelimittest.ParseRateLimit(resp.Header)
			if err != nil || f.Remaining != 100-10-1 {
				t.Fatalf("second response: %+v, %v; want Remaining 89 (the first request charged 10)", f, err)
			}
		})
	}
}
