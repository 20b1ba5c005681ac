package ratelimitecho_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echov5"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func ok(c *echo.Context) error { return c.String(http.StatusOK, "ok") }

func okHTTP(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }

func clock() ratelimit.Option {
	return ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch()))
}

func TestByRoutePlacements(t *testing.T) {
	tests := []struct {
		name   string
		build  func(mw echo.MiddlewareFunc) *echo.Echo
		target string
		want   string
	}{
		{"Use", func(mw echo.MiddlewareFunc) *echo.Echo {
			e := echo.New()
			e.Use(mw)
			e.GET("/users/:id", ok)
			return e
		}, "/users/42", "/users/:id"},
		{"Group", func(mw echo.MiddlewareFunc) *echo.Echo {
			e := echo.New()
			e.Group("/api", mw).GET("/users/:id", ok)
			return e
		}, "/api/users/42", "/api/users/:id"},
		{"NestedGroup", func(mw echo.MiddlewareFunc) *echo.Echo {
			e := echo.New()
			v1 := e.Group("/api").Group("/v1")
			v1.Use(mw)
			v1.GET("/files/*", ok)
			return e
		}, "/api/v1/files/a/b", "/api/v1/files/*"},
		{"Route", func(mw echo.MiddlewareFunc) *echo.Echo {
			e := echo.New()
			e.GET("/users/:id", ok, mw)
			return e
		}, "/users/42", "/users/:id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rk ratelimittest.KeyRecorder
			h := tt.build(ratelimitecho.New(ratelimit.PerMinute(5), rk.Wrap(ratelimitecho.ByRoute())))
			if resp := ratelimittest.Get(h, tt.target); resp.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tt.target, resp.Code, resp.Body)
			}
			if key, err := rk.MustLast(t); err != nil || key != tt.want {
				t.Fatalf("key = %q, %v; want %q", key, err, tt.want)
			}
			var core ratelimittest.KeyRecorder
			h = tt.build(ratelimitecho.New(ratelimit.PerMinute(5), core.Wrap(ratelimit.ByRoute())))
			ratelimittest.Get(h, tt.target)
			if key, err := core.MustLast(t); err != nil || key != tt.want {
				t.Fatalf("ratelimit.ByRoute: key = %q, %v; want %q", key, err, tt.want)
			}
		})
	}
}

func TestByRoutePreHasNoRoute(t *testing.T) {
	var rk ratelimittest.KeyRecorder
	e := echo.New()
	e.Pre(ratelimitecho.New(ratelimit.PerMinute(5), rk.Wrap(ratelimitecho.ByRoute())))
	e.GET("/users/:id", ok)
	if resp := ratelimittest.Get(e, "/users/1"); resp.Code != http.StatusBadRequest {
		t.Fatalf("e.Pre: %d, want 400 (the default key-error policy)", resp.Code)
	}
	if key, err := rk.MustLast(t); key != "" || !errors.Is(err, ratelimit.ErrNoKey) {
		t.Fatalf("key = %q, %v; want ErrNoKey", key, err)
	}
}

func TestByRouteGroupCatchAll(t *testing.T) {
	var rk ratelimittest.KeyRecorder
	e := echo.New()
	e.Group("/api", ratelimitecho.New(ratelimit.PerMinute(5), rk.Wrap(ratelimitecho.ByRoute()))).GET("/users/:id", ok)
	if resp := ratelimittest.Get(e, "/api/nothing/here"); resp.Code != http.StatusNotFound {
		t.Fatalf("unmatched route in group: %d, want 404", resp.Code)
	}
	if key, err := rk.MustLast(t); err != nil || key != "/api/*" {
		t.Fatalf("key = %q, %v; want the group's catch-all", key, err)
	}
}

func TestPerRouteAndGroupLimits(t *testing.T) {
	e := echo.New()
	e.Use(ratelimitecho.New(ratelimit.PerMinute(20), ratelimit.ByIP(), clock(), ratelimit.WithName("global")))
	e.POST("/login", ok, ratelimitecho.New(ratelimit.PerMinute(2), ratelimit.ByIP(), clock(), ratelimit.WithName("login")))
	api := e.Group("/api", ratelimitecho.New(ratelimit.PerMinute(3),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()), clock(), ratelimit.WithName("api")))
	api.GET("/users/:id", ok)
	api.GET("/items/:id", ok)

	n, resp := ratelimittest.FirstLimited(e, 10, func() *http.Request {
		return ratelimittest.NewRequest(http.MethodPost, "/login", "")
	})
	if n != 3 || !strings.Contains(resp.Body, `"login"`) {
		t.Fatalf("login limited at %d (%v), want 3 by the login policy", n, resp)
	}
	for i := 1; i <= 3; i++ {
		if resp := ratelimittest.Get(e, fmt.Sprint("/api/users/", i)); resp.Code != http.StatusOK {
			t.Fatalf("user %d: %d", i, resp.Code)
		}
	}
	resp = ratelimittest.Get(e, "/api/users/4")
	if resp.Code != http.StatusTooManyRequests || !strings.Contains(resp.Body, `"api"`) {
		t.Fatalf("4th user request: %d %s, want 429 by the api policy", resp.Code, resp.Body)
	}
	if resp := ratelimittest.Get(e, "/api/items/1"); resp.Code != http.StatusOK {
		t.Fatalf("items: %d, want its own bucket", resp.Code)
	}
}

func TestSkipper(t *testing.T) {
	e := echo.New()
	e.Use(ratelimitecho.NewWithConfig(ratelimitecho.Config{
		Skipper: func(c *echo.Context) bool { return c.Path() == "/internal" },
		Limit:   ratelimit.PerMinute(1),
		Key:     ratelimit.ByIP(),
		Options: []ratelimit.Option{clock()},
	}))
	e.GET("/internal", ok)
	e.GET("/public", ok)
	for range 3 {
		if resp := ratelimittest.Get(e, "/internal"); resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("skipped: %d %v", resp.Code, resp.Header)
		}
	}
	ratelimittest.Get(e, "/public")
	if resp := ratelimittest.Get(e, "/public"); resp.Code != http.StatusTooManyRequests {
		t.Fatalf("/public: %d, want 429", resp.Code)
	}
}

// TestHookPathSameResponsesAsCore sends the same sequence through the hook
// path (a Config with an ErrorHandler that never runs) and through the core
// middleware on net/http and compares status, headers and body; the plain
// path is covered by TestConformance.
func TestHookPathSameResponsesAsCore(t *testing.T) {
	styles := []ratelimit.HeaderStyle{ratelimit.HeadersIETF, ratelimit.HeadersIETF | ratelimit.HeadersLegacy}
	for _, style := range styles {
		clockA := ratelimittest.NewClock(ratelimittest.Epoch())
		clockB := ratelimittest.NewClock(ratelimittest.Epoch())
		limit := ratelimit.PerMinute(3)
		core := ratelimit.New(limit, ratelimit.ByIP(), ratelimit.WithClock(clockA), ratelimit.WithHeaders(style))(http.HandlerFunc(okHTTP))
		cfg := ratelimitecho.Config{Limit: limit, Key: ratelimit.ByIP(),
			Options: []ratelimit.Option{ratelimit.WithClock(clockB), ratelimit.WithHeaders(style)}}
		cfg.ErrorHandler = func(*echo.Context, error) error { return echo.ErrServiceUnavailable }
		e := echo.New()
		e.GET("/x/:id", ok, ratelimitecho.NewWithConfig(cfg))

		for i := range 8 {
			a := ratelimittest.Get(core, "/x/1")
			b := ratelimittest.Get(e, "/x/1")
			if a.Code == http.StatusOK {
				a.Header.Del("Content-Type")
				b.Header.Del("Content-Type")
			}
			if a.Code != b.Code || a.Body != b.Body || fmt.Sprint(a.Header) != fmt.Sprint(b.Header) {
				t.Fatalf("request %d differs:\ncore %d %v %q\necho %d %v %q", i, a.Code, a.Header, a.Body, b.Code, b.Header, b.Body)
			}
			clockA.Advance(7 * time.Second)
			clockB.Advance(7 * time.Second)
		}
	}
}

var errDown = errors.New("backend down")

// TestErrorHandlerDecidesStoreFailures: Config.ErrorHandler renders a store
// failure as an echo error (fail closed) or lets the request through (nil).
func TestErrorHandlerDecidesStoreFailures(t *testing.T) {
	t.Run("FailClosed", func(t *testing.T) {
		var got error
		reached := false
		e := echo.New()
		e.GET("/x", func(c *echo.Context) error { reached = true; return nil },
			ratelimitecho.NewWithConfig(ratelimitecho.Config{
				Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(),
				Options: []ratelimit.Option{ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown})},
				ErrorHandler: func(c *echo.Context, err error) error {
					got = err
					return echo.NewHTTPError(http.StatusServiceUnavailable, "try later").Wrap(err)
				},
			}))
		resp := ratelimittest.Get(e, "/x")
		if resp.Code != http.StatusServiceUnavailable || reached || !strings.Contains(resp.Body, "try later") {
			t.Fatalf("%d %q (next reached: %v), want echo's 503", resp.Code, resp.Body, reached)
		}
		if !errors.Is(got, errDown) {
			t.Fatalf("error handler got %v", got)
		}
	})
	t.Run("ErrorHandlerFailsOpen", func(t *testing.T) {
		calls := 0
		e := echo.New()
		e.GET("/x", ok, ratelimitecho.NewWithConfig(ratelimitecho.Config{
			Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(),
			Options:      []ratelimit.Option{ratelimit.WithStore(ratelimittest.FailingStore{Err: errDown})},
			ErrorHandler: func(*echo.Context, error) error { calls++; return nil },
		}))
		for range 2 {
			if resp := ratelimittest.Get(e, "/x"); resp.Code != http.StatusOK {
				t.Fatalf("%d, want 200", resp.Code)
			}
		}
		if calls != 2 {
			t.Fatalf("error handler ran %d times", calls)
		}
	})
}

func TestDenyHandlerReturnsError(t *testing.T) {
	var decision *ratelimit.Verdict
	reached := 0
	e := echo.New()
	e.GET("/x", func(c *echo.Context) error { reached++; return c.NoContent(http.StatusOK) },
		ratelimitecho.NewWithConfig(ratelimitecho.Config{
			Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(),
			Options: []ratelimit.Option{clock(), ratelimit.WithName("x")},
			DenyHandler: func(c *echo.Context, v *ratelimit.Verdict) error {
				decision = v
				return echo.NewHTTPError(http.StatusTooManyRequests, "slow down")
			},
		}))
	ratelimittest.Get(e, "/x")
	resp := ratelimittest.Get(e, "/x")
	if resp.Code != http.StatusTooManyRequests || reached != 1 {
		t.Fatalf("%d (next reached %d times), want 429 and 1", resp.Code, reached)
	}
	if !strings.Contains(resp.Body, "slow down") || resp.Header.Get("Retry-After") != "60" ||
		resp.Header.Get("RateLimit") != `"x";r=0;t=60` || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("echo-rendered denial lacks the limiter's fields: %v %q", resp.Header, resp.Body)
	}
	if decision == nil || decision.Rule() != "x" || decision.Result().Allowed || !decision.Denied() {
		t.Fatalf("decision = %+v", decision)
	}
}

func TestDenialReturnsNilAfterCoreResponse(t *testing.T) {
	var errs []error
	e := echo.New()
	e.HTTPErrorHandler = func(c *echo.Context, err error) { errs = append(errs, err) }
	e.GET("/x", ok, ratelimitecho.New(ratelimit.PerMinute(1), ratelimit.ByIP(), clock()))
	ratelimittest.Get(e, "/x")
	resp := ratelimittest.Get(e, "/x")
	if resp.Code != http.StatusTooManyRequests || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(resp.Body, "https://iana.org/assignments/http-problem-types#quota-exceeded") {
		t.Fatalf("%d %v %q", resp.Code, resp.Header, resp.Body)
	}
	if len(errs) != 0 {
		t.Fatalf("HTTPErrorHandler got %v", errs)
	}
}

func TestMiddlewareNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "ratelimitecho:") {
			t.Fatalf("recovered %v", r)
		}
	}()
	ratelimitecho.Middleware(nil)
}

func BenchmarkAllow(b *testing.B) {
	hooks := ratelimitecho.Config{
		Limit: ratelimit.PerSecond(1e9), Key: ratelimit.ByIP(),
		DenyHandler:  func(*echo.Context, *ratelimit.Verdict) error { return echo.ErrTooManyRequests },
		ErrorHandler: func(*echo.Context, error) error { return echo.ErrServiceUnavailable },
	}
	for _, bm := range []struct {
		name string
		mw   echo.MiddlewareFunc
	}{
		{"ByIP", ratelimitecho.New(ratelimit.PerSecond(1e9), ratelimit.ByIP())},
		{"ByRoute", ratelimitecho.New(ratelimit.PerSecond(1e9), ratelimitecho.ByRoute())},
		{"ByIPAndRoute", ratelimitecho.New(ratelimit.PerSecond(1e9), ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()))},
		{"ByIPWithHandlers", ratelimitecho.NewWithConfig(hooks)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			e := echo.New()
			e.GET("/users/:id", func(*echo.Context) error { return nil }, bm.mw)
			benchServe(b, e)
		})
	}
	b.Run("NoLimiter", func(b *testing.B) {
		e := echo.New()
		e.GET("/users/:id", func(*echo.Context) error { return nil })
		benchServe(b, e)
	})
	// echo applies route middleware per request: any middleware costs one
	// closure allocation.
	b.Run("NoopMiddleware", func(b *testing.B) {
		e := echo.New()
		noop := func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error { return next(c) }
		}
		e.GET("/users/:id", func(*echo.Context) error { return nil }, noop)
		benchServe(b, e)
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

// TestHookPathConcurrencyReleases checks that a Concurrency slot is held
// while the handler runs and released after it on the hook path (the plain
// path is covered by TestConformance).
func TestHookPathConcurrencyReleases(t *testing.T) {
	cfg := ratelimitecho.Config{
		Rules:   []ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Key: ratelimit.ByIP(), Algorithm: ratelimit.Concurrency}},
		Options: []ratelimit.Option{clock()},
	}
	cfg.ErrorHandler = func(*echo.Context, error) error { return echo.ErrServiceUnavailable }
	e := echo.New()
	inner := 0
	e.GET("/slow", func(c *echo.Context) error {
		if c.QueryParam("nested") == "" {
			inner = ratelimittest.Get(e, "/slow?nested=1").Code
		}
		return c.String(http.StatusOK, "done")
	}, ratelimitecho.NewWithConfig(cfg))
	if resp := ratelimittest.Get(e, "/slow"); resp.Code != http.StatusOK || inner != http.StatusTooManyRequests {
		t.Fatalf("outer %d, inner %d; want 200 and 429", resp.Code, inner)
	}
	if resp := ratelimittest.Get(e, "/slow?nested=1"); resp.Code != http.StatusOK {
		t.Fatalf("after the first request finished: %d, want 200", resp.Code)
	}
}

// TestSettledCostReachesTheLimiter: a handler that settles 10 units under a
// settled limiter (estimate 1) is charged 10, with Middleware and with a
// DenyHandler: the next response's RateLimit shows both requests' units.
func TestSettledCostReachesTheLimiter(t *testing.T) {
	builds := map[string]func(opts ...ratelimit.Option) echo.MiddlewareFunc{
		"Middleware": func(opts ...ratelimit.Option) echo.MiddlewareFunc {
			return ratelimitecho.Middleware(ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, opts...))
		},
		"NewWithConfig": func(opts ...ratelimit.Option) echo.MiddlewareFunc {
			return ratelimitecho.NewWithConfig(ratelimitecho.Config{Rules: []ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}},
				Options: opts, DenyHandler: func(*echo.Context, *ratelimit.Verdict) error {
					return echo.NewHTTPError(http.StatusTooManyRequests, "")
				}})
		},
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			e.Use(build(clock()))
			e.GET("/", func(c *echo.Context) error {
				if !ratelimit.Settle(c.Request().Context(), c.Response(), 10) {
					t.Error("Settle found no settled rule in the handler's context")
				}
				return c.NoContent(http.StatusOK)
			})
			ratelimittest.Do(e, ratelimittest.NewRequest("GET", "/", ""))
			resp := ratelimittest.Do(e, ratelimittest.NewRequest("GET", "/", ""))
			f, err := ratelimittest.ParseRateLimit(resp.Header)
			if err != nil || f.Remaining != 100-10-1 {
				t.Fatalf("second response: %+v, %v; want Remaining 89 (the first request charged 10)", f, err)
			}
		})
	}
}
