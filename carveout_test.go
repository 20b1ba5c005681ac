package ratelimit_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func TestCarveOutsMatchOnlyTheExactCleanPath(t *testing.T) {
	cases := []struct {
		opts    []ratelimit.Option
		method  string
		target  string
		limited bool
	}{
		{nil, "GET", "/healthz", false},
		{nil, "GET", "/metrics", false},
		{nil, "GET", "/livez", false},
		{nil, "GET", "/readyz", false},
		{nil, "GET", "/healthz?x=1", false},
		{nil, "HEAD", "/readyz", true}, // not a ServeMux: HEAD may not reach the GET route
		{nil, "GET", "/healthz/", true},
		{nil, "GET", "//healthz", true},
		{nil, "GET", "/healthz//", true},
		{nil, "GET", "/healthz%2F", true},
		{nil, "GET", "/%68ealthz", true},
		{nil, "GET", "/HEALTHZ", true},
		{nil, "GET", "/healthz;x", true},
		{nil, "POST", "/healthz", true},
		{nil, "GET", "/healthz/x", true},
		{nil, "GET", "/healthzx", true},
		{nil, "GET", "/healthz/../api", true},
		{nil, "GET", "/api/../healthz", true},
		{nil, "GET", "/./healthz", true},
		{nil, "GET", "/api", true},
		{[]ratelimit.Option{ratelimit.WithCarveOuts()}, "GET", "/healthz", true},
		{[]ratelimit.Option{ratelimit.WithCarveOuts("/ping")}, "GET", "/ping", false},
		{[]ratelimit.Option{ratelimit.WithCarveOuts("/ping")}, "GET", "/healthz", true},
		{[]ratelimit.Option{ratelimit.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Internal") == "yes" })}, "GET", "/api", false},
	}
	for _, c := range cases {
		t.Run(c.method+c.target, func(t *testing.T) {
			opts := append([]ratelimit.Option{ratelimit.WithClock(newClock())}, c.opts...)
			h := ratelimit.New(ratelimit.PerHour(1), byPeer, opts...)(ok)
			var last *ratelimittest.Response
			for i := 0; i < 3; i++ {
				last = ratelimittest.Do(h, ratelimittest.NewRequest(c.method, c.target, "", "X-Internal", "yes"))
			}
			if last.Limited() != c.limited {
				t.Fatalf("third %s %s: status %d, want limited=%v", c.method, c.target, last.Code, c.limited)
			}
			if !c.limited && last.Header.Get("RateLimit") != "" {
				t.Fatalf("carved-out response carries RateLimit %q", last.Header.Get("RateLimit"))
			}
		})
	}
}

// served returns a handler that names itself in the ServedBy header.
func served(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimittest.ServedBy, name)
		w.Write([]byte(name))
	})
}

// carveOutPaths are the default carve-outs and one next to a file server.
var carveOutPaths = append(ratelimit.DefaultCarveOuts(), "/public/status")

// exhaustible returns a limiter of 2 requests an hour for all clients
// together, reporting to p, on a clock that stands still.
func exhaustible(p *ratelimittest.CarveOutProber) *ratelimit.Limiter {
	return ratelimit.NewLimiter(ratelimit.PerHour(2), ratelimit.Global(),
		ratelimit.WithCarveOuts(carveOutPaths...), ratelimit.WithObserver(p), ratelimit.WithClock(newClock()))
}

// fileServer serves /public/ from memory, including a file named status.
func fileServer() http.Handler {
	fs := fstest.MapFS{"status": {Data: []byte("static")}, "status/index.html": {Data: []byte("dir")}}
	files := http.StripPrefix("/public/", http.FileServerFS(fs))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimittest.ServedBy, "/public/")
		files.ServeHTTP(w, r)
	})
}

func TestCarveOutsNeverBypassServeMux(t *testing.T) {
	routes := func(mux *http.ServeMux, wrap func(http.Handler) http.Handler, method string) {
		for _, p := range carveOutPaths {
			mux.Handle(method+p, wrap(served(p)))
		}
		mux.Handle("/public/", wrap(fileServer()))
		mux.Handle("/", wrap(served("/")))
		mux.Handle("POST /api", wrap(served("/api")))
	}
	none := func(h http.Handler) http.Handler { return h }
	t.Run("around the mux", func(t *testing.T) {
		p := new(ratelimittest.CarveOutProber)
		mux := http.NewServeMux()
		routes(mux, none, "")
		skipped := p.Check(t, exhaustible(p).Handler(mux), carveOutPaths...)
		if !skipped[ratelimittest.Probe{Method: "HEAD", Target: "/healthz"}] {
			t.Error("HEAD /healthz was limited: ServeMux serves it from the /healthz route")
		}
	})
	t.Run("around the mux, GET patterns", func(t *testing.T) {
		p := new(ratelimittest.CarveOutProber)
		mux := http.NewServeMux()
		routes(mux, none, "GET ")
		skipped := p.Check(t, exhaustible(p).Handler(mux), carveOutPaths...)
		if !skipped[ratelimittest.Probe{Method: "HEAD", Target: "/metrics"}] {
			t.Error("HEAD /metrics was limited: ServeMux serves HEAD from a GET pattern")
		}
	})
	t.Run("inside each route", func(t *testing.T) {
		p := new(ratelimittest.CarveOutProber)
		mux := http.NewServeMux()
		routes(mux, exhaustible(p).Handler, "")
		p.Check(t, mux, carveOutPaths...)
	})
}

func TestCarveOutWithoutItsRouteIsLimited(t *testing.T) {
	p := new(ratelimittest.CarveOutProber)
	mux := http.NewServeMux()
	mux.Handle("/", served("/")) // an SPA fallback; no /healthz route
	mux.Handle("/public/", fileServer())
	mux.Handle("GET /healthz/", served("/healthz/"))
	h := exhaustible(p).Handler(mux)
	for range 3 {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", ""))
	}
	for _, target := range []string{"/healthz", "/metrics", "/public/status"} {
		for _, m := range []string{"GET", "HEAD"} {
			if resp := ratelimittest.Do(h, ratelimittest.NewRequest(m, target, "")); !resp.Limited() {
				t.Errorf("%s %s: status %d served by %q: skipped though the mux has no route for it", m, target, resp.Code, resp.Header.Get(ratelimittest.ServedBy))
			}
		}
	}
}

func TestCarveOutHeadNeedsARouterKnownToServeIt(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/healthz", served("/healthz"))
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(w, r) })
	h := ratelimit.New(ratelimit.PerHour(1), ratelimit.Global(), ratelimit.WithClock(newClock()))(wrapped)
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", ""))
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("HEAD", "/healthz", "")); !resp.Limited() {
		t.Errorf("HEAD /healthz through an unknown router: status %d, want limited", resp.Code)
	}
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")); resp.Limited() {
		t.Errorf("GET /healthz through an unknown router: limited, want carved out")
	}
}

func TestAdmitRouteDecidesFromTheRoute(t *testing.T) {
	cases := []struct {
		method, target, route string
		limited               bool
	}{
		{"GET", "/healthz", "/healthz", false},
		{"HEAD", "/healthz", "/healthz", false}, // the router matched a HEAD route
		{"GET", "/%68ealthz", "/healthz", false},
		{"GET", "/healthz", "", true}, // no route: 404 or 405
		{"GET", "/healthz", "/*", true},
		{"GET", "/healthz", "/:name", true},
		{"GET", "/healthz/", "/healthz/", true},
		{"POST", "/healthz", "/healthz", true},
	}
	for _, c := range cases {
		p := new(ratelimittest.CarveOutProber)
		l := exhaustible(p)
		for range 3 {
			l.Admit(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/api", ""))
		}
		w := ratelimittest.NewDiscardWriter()
		_, admitted := l.AdmitRoute(w, ratelimittest.NewRequest(c.method, c.target, ""), c.route)
		if admitted == c.limited {
			t.Errorf("%s %s on route %q: admitted %v, want limited=%v", c.method, c.target, c.route, admitted, c.limited)
		}
	}
}

func TestCarvesOut(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerHour(1), ratelimit.Global(), ratelimit.WithCarveOuts("/ping"))
	if !l.CarvesOut("/ping") || l.CarvesOut("/healthz") || l.CarvesOut("/ping/") {
		t.Fatal("CarvesOut does not report the configured paths")
	}
}

func TestCarveOutPathsAreLiteralCleanPaths(t *testing.T) {
	for _, p := range []string{"", "healthz", "/", "/healthz/", "//healthz", "/a/../b", "/./a", "/{name}", "/:id", "/*", "/a b", "/health%7Az", "GET /healthz"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "ratelimit: ") {
					t.Errorf("WithCarveOuts(%q): recovered %v, want a ratelimit: panic", p, r)
				}
			}()
			ratelimit.WithCarveOuts(p)
		}()
	}
	ratelimit.WithCarveOuts("/healthz", "/.well-known/live", "/v1/status_check~x")
}

func TestDefaultCarveOutsCannotBeChangedFromOutside(t *testing.T) {
	paths := ratelimit.DefaultCarveOuts()
	paths[0] = "/api"
	h := ratelimit.New(ratelimit.PerMinute(1), byPeer)(ok)
	for i := 0; i < 3; i++ {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")); resp.Code != 200 {
			t.Fatalf("/healthz request %d: %d, want a carve-out", i, resp.Code)
		}
	}
	if ratelimit.DefaultCarveOuts()[0] != "/healthz" {
		t.Fatal("editing the returned slice changed the defaults")
	}
}

// hostileHeaders are request headers that made other middleware skip its
// checks, rewrite the path it checked or trust the client: Next.js skipped
// every middleware for x-middleware-subrequest (CVE-2025-29927); proxies
// and frameworks honour X-Original-URL, X-Rewrite-URL and method
// overrides; the rest name internal, prefetch, upgrade or local traffic.
var hostileHeaders = [][2]string{
	{"X-Middleware-Subrequest", "middleware:middleware:middleware:middleware:middleware"},
	{"X-Middleware-Subrequest", "src/middleware:pages/_middleware"},
	{"X-Middleware-Prefetch", "1"},
	{"X-Original-URL", "/healthz"},
	{"X-Rewrite-URL", "/healthz"},
	{"X-Forwarded-Uri", "/healthz"},
	{"X-Forwarded-Prefix", "/healthz"},
	{"X-Envoy-Original-Path", "/healthz"},
	{"X-HTTP-Method-Override", "GET"},
	{"X-HTTP-Method", "HEAD"},
	{"X-Method-Override", "GET"},
	{"X-Forwarded-For", "127.0.0.1"},
	{"X-Real-IP", "127.0.0.1"},
	{"Forwarded", "for=127.0.0.1;host=localhost"},
	{"X-Forwarded-Host", "localhost"},
	{"X-Forwarded-Proto", "https"},
	{"Connection", "Upgrade, X-Forwarded-For, Authorization"},
	{"Upgrade", "websocket"},
	{"Purpose", "prefetch"},
	{"Sec-Purpose", "prefetch"},
	{"X-Internal", "true"},
	{"X-RateLimit-Bypass", "1"},
	{"X-Skip-RateLimit", "true"},
	{"RateLimit-Policy", `"unlimited";q=1000000`},
	{"Cache-Control", "no-cache"},
	{"Expect", "100-continue"},
}

// TestNoRequestHeaderTurnsTheLimiterOff: a client that has spent its limit
// stays limited whatever headers it sends, one at a time or all at once,
// on a limited route and on a POST to a carve-out path, around a ServeMux
// and through Admit (the adapters' entry). Only the route decides a
// carve-out, and only the user's own WithSkip predicates skip anything
// else: the limiter reads no header of its own to skip a request.
func TestNoRequestHeaderTurnsTheLimiterOff(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/metrics", "/api"} {
		mux.Handle(p, served(p))
	}
	l := ratelimit.NewLimiter(ratelimit.PerHour(1), ratelimit.ByIP(), ratelimit.WithClock(newClock()))
	around := l.Handler(mux)
	admitted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := l.Admit(w, r); ok {
			mux.ServeHTTP(w, r)
		}
	})
	const peer = "192.0.2.1:1"
	if resp := ratelimittest.Do(around, ratelimittest.NewRequest("GET", "/api", peer)); resp.Code != 200 {
		t.Fatalf("first request: %d", resp.Code)
	}
	all := ratelimittest.NewRequest("GET", "/api", peer)
	for _, h := range hostileHeaders {
		all.Header.Add(h[0], h[1])
	}
	for _, h := range append(hostileHeaders, [2]string{"", ""}) {
		for _, target := range []struct{ method, path string }{{"GET", "/api"}, {"POST", "/metrics"}, {"PUT", "/healthz"}} {
			for name, handler := range map[string]http.Handler{"around the mux": around, "Admit": admitted} {
				req := ratelimittest.NewRequest(target.method, target.path, peer)
				sent := h[0] + ": " + h[1]
				if h[0] == "" {
					req.Header, sent = all.Header.Clone(), "every header at once"
				} else {
					req.Header.Set(h[0], h[1])
				}
				if resp := ratelimittest.Do(handler, req); resp.Code != 429 || resp.Header.Get(ratelimittest.ServedBy) != "" {
					t.Errorf("%s %s with %s (%s): status %d, served by %q; want 429, not served",
						target.method, target.path, sent, name, resp.Code, resp.Header.Get(ratelimittest.ServedBy))
				}
			}
		}
	}
	if resp := ratelimittest.Do(around, ratelimittest.NewRequest("GET", "/healthz", peer)); resp.Code != 200 {
		t.Fatalf("GET /healthz, carved out: %d", resp.Code)
	}
}
