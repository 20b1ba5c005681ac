package ratelimitgin_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

func okHTTP(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }

func get(h http.Handler, target string) *ratelimittest.Response {
	return ratelimittest.Do(h, ratelimittest.NewRequest(http.MethodGet, target, ""))
}

func clock() ratelimit.Option {
	return ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch))
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
			if resp := get(h, tt.target); resp.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tt.target, resp.Code, resp.Body)
			}
			if key, err := rk.MustLast(t); err != nil || key != tt.want {
				t.Fatalf("key = %q, %v; want %q", key, err, tt.want)
			}
			// The core's ByRoute sees the same pattern.
			var core ratelimittest.KeyRecorder
			h = tt.build(ratelimitgin.New(ratelimit.PerMinute(5), core.Wrap(ratelimit.ByRoute())))
			get(h, tt.target)
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
	if resp := get(r, "/nowhere"); resp.Code != http.StatusBadRequest {
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
		if resp := get(r, fmt.Sprint("/api/users/", i)); resp.Code != http.StatusOK {
			t.Fatalf("user %d: %d", i, resp.Code)
		}
	}
	resp = get(r, "/api/users/4")
	if resp.Code != http.StatusTooManyRequests || !strings.Contains(resp.Body, `"api"`) {
		t.Fatalf("4th user request: %d %s, want 429 by the api policy", resp.Code, resp.Body)
	}
	if resp := get(r, "/api/items/1"); resp.Code != http.StatusOK {
		t.Fatalf("items: %d, want its own bucket", resp.Code)
	}
}

func TestDenialAborts(t *testing.T) {
	var reached int
	r := gin.New()
	r.GET("/x",
		ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), clock()),
		func(c *gin.Context) { reached++ },
		ok)
	get(r, "/x")
	resp := get(r, "/x")
	if resp.Code != http.StatusTooManyRequests || reached != 1 {
		t.Fatalf("second request: %d, next handler ran %d times; want 429 and 1", resp.Code, reached)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestCarveOuts(t *testing.T) {
	r := gin.New()
	r.Use(ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), clock()))
	r.GET("/healthz", ok)
	r.GET("/work", ok)
	get(r, "/work")
	if resp := get(r, "/work"); resp.Code != http.StatusTooManyRequests {
		t.Fatalf("/work: %d, want 429", resp.Code)
	}
	for range 3 {
		if resp := get(r, "/healthz"); resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("/healthz: %d %v, want 200 without rate-limit fields", resp.Code, resp.Header)
		}
	}
}

// TestSameResponsesAsCore sends the same sequence through gin and through
// the core middleware on net/http and compares status, headers and body.
func TestSameResponsesAsCore(t *testing.T) {
	styles := []ratelimit.HeaderStyle{ratelimit.HeadersIETF, ratelimit.HeadersIETF | ratelimit.HeadersLegacy}
	for _, style := range styles {
		clockA := ratelimittest.NewClock(ratelimittest.Epoch)
		clockB := ratelimittest.NewClock(ratelimittest.Epoch)
		limit := ratelimit.PerMinute(3)
		core := ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithClock(clockA), ratelimit.WithHeaders(style))(http.HandlerFunc(okHTTP))
		r := gin.New()
		r.GET("/x/:id", ratelimitgin.New(limit, ratelimit.ByIP(), ratelimit.WithClock(clockB), ratelimit.WithHeaders(style)), ok)

		for i := range 8 {
			a := get(core, "/x/1")
			b := get(r, "/x/1")
			// The handlers' own Content-Type (sniffed, or set by c.String)
			// is not the limiter's business.
			if a.Code == http.StatusOK {
				a.Header.Del("Content-Type")
				b.Header.Del("Content-Type")
			}
			if a.Code != b.Code || a.Body != b.Body || fmt.Sprint(a.Header) != fmt.Sprint(b.Header) {
				t.Fatalf("request %d differs:\ncore %d %v %q\ngin  %d %v %q", i, a.Code, a.Header, a.Body, b.Code, b.Header, b.Body)
			}
			clockA.Advance(7 * time.Second)
			clockB.Advance(7 * time.Second)
		}
	}
}

var errDown = errors.New("backend down")

func TestStoreErrors(t *testing.T) {
	t.Run("FailOpen", func(t *testing.T) {
		r := gin.New()
		r.GET("/x", ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown})), ok)
		for range 3 {
			if resp := get(r, "/x"); resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
				t.Fatalf("%d %v, want 200 without fields", resp.Code, resp.Header)
			}
		}
	})
	t.Run("FailClosed", func(t *testing.T) {
		var got error
		reached := false
		r := gin.New()
		r.GET("/x", ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown}),
			ratelimit.WithFailurePolicy(ratelimit.FailClosed(http.StatusServiceUnavailable)),
			ratelimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			})), func(c *gin.Context) { reached = true })
		if resp := get(r, "/x"); resp.Code != http.StatusServiceUnavailable || reached {
			t.Fatalf("%d (next reached: %v), want 503 and an aborted chain", resp.Code, reached)
		}
		if !errors.Is(got, errDown) {
			t.Fatalf("error handler got %v", got)
		}
	})
}

func TestDeniedHandler(t *testing.T) {
	r := gin.New()
	r.GET("/x", ratelimitgin.New(ratelimit.PerMinute(1), ratelimit.ByIP(), clock(),
		ratelimit.WithDeniedHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := ratelimit.DecisionFrom(r)
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, "slow down (%s)", d.Rule)
		}))), ok)
	get(r, "/x")
	resp := get(r, "/x")
	if resp.Code != http.StatusTooManyRequests || resp.Body != "slow down (ip-1-per-1m)" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %q %v", resp.Code, resp.Body, resp.Header)
	}
}

func TestConcurrent(t *testing.T) {
	r := gin.New()
	r.Use(ratelimitgin.New(ratelimit.PerMinute(50), ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()), clock()))
	r.GET("/a/:id", ok)
	r.GET("/b/:id", ok)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := map[string]int{}
	for i := range 200 {
		wg.Go(func() {
			route := []string{"a", "b"}[i%2]
			resp := get(r, fmt.Sprintf("/%s/%d", route, i))
			if resp.Code == http.StatusOK {
				mu.Lock()
				allowed[route]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed["a"] != 50 || allowed["b"] != 50 {
		t.Fatalf("allowed %v, want 50 per route", allowed)
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

// TestConcurrencyReleases checks that a Concurrency slot is held while the
// rest of the chain runs and released after it.
func TestConcurrencyReleases(t *testing.T) {
	r := gin.New()
	inner := 0
	r.GET("/slow", ratelimitgin.New(ratelimit.Limit{Rate: 1, Period: time.Minute}, ratelimit.ByIP(),
		ratelimit.WithAlgorithm(ratelimit.Concurrency), clock()),
		func(c *gin.Context) {
			if c.Query("nested") == "" {
				// While this request holds the only slot, another is denied.
				inner = get(r, "/slow?nested=1").Code
			}
			c.String(http.StatusOK, "done")
		})
	if resp := get(r, "/slow"); resp.Code != http.StatusOK || inner != http.StatusTooManyRequests {
		t.Fatalf("outer %d, inner %d; want 200 and 429", resp.Code, inner)
	}
	if resp := get(r, "/slow?nested=1"); resp.Code != http.StatusOK {
		t.Fatalf("after the first request finished: %d, want 200 (slot released)", resp.Code)
	}
}
