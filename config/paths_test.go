package config_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit/config"
)

// pathRules limits every request to 2 an hour per client, the login route
// to 1 an hour, a subtree of proxied URLs to 5 an hour, and exempts
// /status/health.
const pathRules = `
rules:
  - name: site
    key: client_ip
    limit: 2/hour
  - name: login
    key: client_ip
    limit: 1/hour
    match: {routes: ["/api/login"]}
  - name: fetch
    key: client_ip
    limit: 5/hour
    match: {routes: ["/fetch/*"]}
  - name: health
    unlimited: true
    match: {routes: ["/status/health"]}
`

// TestPathSpellingsNeverWalkAroundARule serves the rules in front of two
// routers. Behind one that cleans paths (as gin with RemoveExtraSlash, chi
// after CleanPath, or a normalising proxy do), a client that has spent its
// login limit reaches the login handler by no other spelling of the route
// ("//api/login", "/api/./login", "/api/x/../login", "/api%2Flogin").
// Behind one that splits the path as sent (ServeMux and chi keep "%2F"
// inside a segment), a client that has spent its limit is not exempted by
// "/status%2Fhealth", which that router serves from another route. A path
// whose readings all match the same rules is served as usual.
func TestPathSpellingsNeverWalkAroundARule(t *testing.T) {
	cfg, err := config.Parse("paths.yaml", []byte(pathRules), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.Build()
	var served []string
	cleaning := set.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, path.Clean(r.URL.Path))
	}))
	asSent := set.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.EscapedPath())
	}))
	do := func(h http.Handler, peer, target string) int {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.URL, r.RequestURI, r.RemoteAddr = u, target, peer
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	refused := func(h http.Handler, peer, target string) {
		t.Helper()
		served = served[:0]
		if code := do(h, peer, target); code != 429 && code != 400 || len(served) > 0 {
			t.Errorf("GET %s after the limit: status %d, served %v; want 429 or 400, nothing served", target, code, served)
		}
	}

	const loggedIn = "192.0.2.1:1"
	if code := do(cleaning, loggedIn, "/api/login"); code != 200 {
		t.Fatalf("first login: %d", code)
	}
	for _, target := range []string{
		"/api/login", "//api/login", "/api//login", "/api/./login", "/api/x/../login",
		"/./api/login", "/api/login/.", "/x/..//api/login", "/api%2Flogin", "/api%2flogin",
	} {
		refused(cleaning, loggedIn, target)
	}

	const spent = "192.0.2.2:1"
	for range 2 {
		if code := do(asSent, spent, "/other"); code != 200 {
			t.Fatalf("GET /other within the limit: %d", code)
		}
	}
	for range 3 {
		if code := do(asSent, spent, "/status/health"); code != 200 {
			t.Fatalf("GET /status/health, exempt: %d", code)
		}
	}
	for _, target := range []string{"/status%2Fhealth", "/status%2fhealth", "//status/health", "/status/./health", "/x/../status/health"} {
		refused(asSent, spent, target)
	}

	// Both readings of this path are under /fetch/* and nothing else.
	const fresh = "192.0.2.3:1"
	if code := do(cleaning, fresh, "/fetch/https://example.com/a"); code != 200 {
		t.Fatalf("GET /fetch/https://example.com/a: %d, want 200", code)
	}

	// A split path is refused as such, whatever the client has left: a 400
	// problem response, before the handler.
	served = served[:0]
	r := httptest.NewRequest("GET", "/", nil)
	r.URL, r.RemoteAddr = &url.URL{Path: "//api/login"}, "192.0.2.4:1"
	rec := httptest.NewRecorder()
	cleaning.ServeHTTP(rec, r)
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/problem+json" || len(served) > 0 {
		t.Fatalf("GET //api/login from a fresh client: %d %q, served %v; want a 400 problem response, nothing served",
			rec.Code, rec.Header().Get("Content-Type"), served)
	}
	// The detail says what is wrong with the request, not that it has no key.
	var problem struct{ Detail string }
	if err := json.Unmarshal(rec.Body.Bytes(), &problem); err != nil || !strings.Contains(problem.Detail, "path is not clean") {
		t.Fatalf("GET //api/login: problem body %q (%v); want a detail about the path", rec.Body, err)
	}
}
