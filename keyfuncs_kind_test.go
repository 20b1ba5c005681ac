package ratelimit_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// keyKindOfRule returns the KeyKind a limiter's events report for key.
// The key functions are built here, in another package, so that a
// constructor inlined into its caller (which would give its closure a new
// code pointer) fails this test.
func keyKindOfRule(t *testing.T, key ratelimit.KeyFunc, kind string) string {
	t.Helper()
	seen := false
	obs := ratelimit.WithObserver(ratelimit.ObserverFunc(func(e ratelimit.Event) {
		kind, seen = e.KeyKind, true
	}))
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerMinute(10), Key: key, KeyKind: kind}}, obs)(http.NotFoundHandler())
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/x", "203.0.113.7:1234", "Authorization", "Bearer abc", "X-API-Key", "k"))
	if !seen {
		t.Fatal("no event observed")
	}
	return kind
}

func TestBuiltinKeyFuncsReportTheirKind(t *testing.T) {
	user := func(*http.Request) (string, bool) { return "alice", true }
	custom := ratelimit.KeyFunc(func(*http.Request) (string, error) { return "k", nil })
	for _, tc := range []struct {
		name string
		key  ratelimit.KeyFunc
		want string
	}{
		{"ByIP", ratelimit.ByIP(), "ip"},
		{"ClientIPConfig.KeyFunc with SourcePeer", ratelimit.ClientIPConfig{Source: ratelimit.SourcePeer, IPv4Prefix: 32, IPv6Prefix: 48}.KeyFunc(), "ip"},
		{"ByClientIP", ratelimit.ByClientIP("10.0.0.0/8"), "client_ip"},
		{"ClientIPConfig.KeyFunc with Hops", ratelimit.ClientIPConfig{Hops: 2}.KeyFunc(), "client_ip"},
		{"ClientIPConfig.KeyFunc with SourceHeader", ratelimit.ClientIPConfig{Source: ratelimit.SourceHeader, Header: "CF-Connecting-IP", TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc(), "client_ip"},
		{"ClientIPConfig.KeyFunc", ratelimit.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}, Source: ratelimit.SourceForwarded}.KeyFunc(), "client_ip"},
		{"ByHeader", ratelimit.ByHeader("X-Tenant"), "header"},
		{"ByUser", ratelimit.ByUser(user), "user"},
		{"ByRoute", ratelimit.ByRoute(), "route"},
		{"ByRouteFunc", ratelimit.ByRouteFunc(func(*http.Request) string { return "/x" }), "route"},
		{"ByRouteFunc with errors", ratelimit.ByRouteFunc(func(*http.Request) (string, error) { return "/x", nil }), "route"},
		{"ByBearerToken", ratelimit.ByBearerToken(), "bearer"},
		{"TokenConfig.KeyFunc", ratelimit.TokenConfig{Secret: []byte("0123456789abcdef0123456789abcdef")}.KeyFunc(), "bearer"},
		{"ByAPIKey", ratelimit.ByAPIKey("X-API-Key"), "api_key"},
		{"TokenConfig.KeyFunc with Header", ratelimit.TokenConfig{Header: "X-API-Key", Secret: []byte("0123456789abcdef")}.KeyFunc(), "api_key"},
		{"Keys", ratelimit.Keys(ratelimit.ByIP(), ratelimit.ByRoute()), "key"},
		{"custom", custom, "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyKindOfRule(t, tc.key, ""); got != tc.want {
				t.Fatalf("KeyKind %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRuleKeyKindOverridesTheBuiltinKind(t *testing.T) {
	if got := keyKindOfRule(t, ratelimit.ByIP(), "office"); got != "office" {
		t.Fatalf("KeyKind %q, want office", got)
	}
}

// policies returns the names listed in a response's RateLimit-Policy field.
func policies(h http.Header) []string {
	ps, err := ratelimittest.ParsePolicies(h)
	if err != nil {
		return []string{err.Error()}
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names
}

func TestNestedLimitersWithoutNamesReportDistinctPolicies(t *testing.T) {
	perIP := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP())
	perKey := ratelimit.New(ratelimit.PerSecond(1).WithBurst(1), ratelimit.ByAPIKey("X-API-Key"),
		ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch()))) // a second between the requests must not refill it
	h := perIP(perKey(http.NotFoundHandler()))
	req := func() *ratelimittest.Response {
		return ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1", "X-API-Key", "k"))
	}
	resp := req()
	got := policies(resp.Header)
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("RateLimit-Policy %q: want two distinct policies", resp.Header.Values("RateLimit-Policy"))
	}
	resp = req() // the API key's burst of 1 is spent
	if resp.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: status %d, want 429", resp.Code)
	}
	if !strings.Contains(resp.Body, `"violated-policies":["api_key-1-per-1s"]`) {
		t.Fatalf("429 body %s: want the API-key policy named", resp.Body)
	}
}

func TestDefaultNameDescribesTheRule(t *testing.T) {
	for _, tc := range []struct {
		limit ratelimit.Limit
		key   ratelimit.KeyFunc
		opts  []ratelimit.Option
		want  string
	}{
		{ratelimit.PerMinute(100), ratelimit.ByIP(), nil, "ip-100-per-1m"},
		{ratelimit.PerMinute(100).WithBurst(100), ratelimit.ByIP(), nil, "ip-100-per-1m"},
		{ratelimit.PerMinute(100).WithBurst(20), ratelimit.ByIP(), nil, "ip-100-per-1m-burst-20"},
		{ratelimit.PerDay(1000), ratelimit.ByUser(func(*http.Request) (string, bool) { return "u", true }), nil, "user-1000-per-1d"},
		{ratelimit.Limit{Rate: 3, Period: 90 * time.Second}, ratelimit.ByIP(), nil, "ip-3-per-90s"},
		{ratelimit.Limit{Rate: 5, Period: 1500 * time.Millisecond}, ratelimit.ByIP(), nil, "ip-5-per-1500ms"},
		{ratelimit.PerSecond(10), ratelimit.ByIP(), []ratelimit.Option{ratelimit.WithName("login")}, "login"},
	} {
		h := ratelimit.New(tc.limit, tc.key, tc.opts...)(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1"))
		if got := policies(resp.Header); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%+v %v: policies %q, want %q", tc.limit, tc.opts, got, tc.want)
		}
	}
}

// TestDefaultNameNamesAnAlgorithmOtherThanGCRA: a rule's default name
// carries its algorithm when it is not the default.
func TestDefaultNameNamesAnAlgorithmOtherThanGCRA(t *testing.T) {
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10), Key: ratelimit.ByIP(), Algorithm: ratelimit.SlidingWindow}})(http.NotFoundHandler())
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1"))
	if got := policies(resp.Header); len(got) != 1 || got[0] != "ip-10-per-1s-sliding-window" {
		t.Errorf("policies %q, want ip-10-per-1s-sliding-window", got)
	}
}

// TestDefaultNameUsesTheRuleKeyKind: a Rule's KeyKind, sanitised and cut
// to the name's 64 characters, leads its default name.
func TestDefaultNameUsesTheRuleKeyKind(t *testing.T) {
	for kind, want := range map[string]string{
		"tenant id":             "tenant_id-10-per-1s",
		strings.Repeat("k", 80): strings.Repeat("k", 64),
	} {
		h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10), Key: ratelimit.ByIP(), KeyKind: kind}})(http.NotFoundHandler())
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1"))
		if got := policies(resp.Header); len(got) != 1 || got[0] != want {
			t.Errorf("KeyKind %q: policies %q, want %q", kind, got, want)
		}
	}
}

func TestRuleWithoutNameGetsTheDefaultName(t *testing.T) {
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Limit: ratelimit.PerMinute(100), Key: ratelimit.ByIP()},
		{Quota: ratelimit.Daily(1, time.UTC), Key: ratelimit.ByAPIKey("X-API-Key")},
	})(http.NotFoundHandler())
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1", "X-API-Key", "k"))
	got := strings.Join(policies(resp.Header), ",")
	if !strings.Contains(got, "ip-100-per-1m") {
		t.Fatalf("policies %q: want ip-100-per-1m", got)
	}
	resp = ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1", "X-API-Key", "k"))
	if !resp.Limited() || !strings.Contains(resp.Body, `"violated-policies":["api_key-1-per-day"]`) {
		t.Fatalf("second request: %d %s; want the daily quota api_key-1-per-day to deny", resp.Code, resp.Body)
	}
}

func TestRulesWithTheSameDefaultNamePanic(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), `two rules are named "ip-100-per-1m"`) {
			t.Fatalf("panic %v", r)
		}
	}()
	ratelimit.NewRules([]ratelimit.Rule{
		{Limit: ratelimit.PerMinute(100), Key: ratelimit.ByIP()},
		{Limit: ratelimit.PerMinute(100), Key: ratelimit.ByIP(), Algorithm: ratelimit.GCRA},
	})
}

func TestByRouteAroundTheWholeMuxSaysWhereItBelongs(t *testing.T) {
	var logged strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, _ *http.Request) {})
	h := ratelimit.New(ratelimit.PerMinute(10), ratelimit.ByRoute())(mux) // wrong: around the mux
	for i := 0; i < 3; i++ {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/items/1", ""))
		if resp.Code != http.StatusBadRequest || !strings.Contains(resp.Body, "Install it inside the router") {
			t.Fatalf("request %d: %d %s; want a 400 whose detail says where the limiter belongs", i, resp.Code, resp.Body)
		}
		var problem struct{ Detail string }
		if err := json.Unmarshal([]byte(resp.Body), &problem); err != nil || problem.Detail == "" {
			t.Fatalf("request %d: body %q is not a problem with a detail: %v", i, resp.Body, err)
		}
	}
	if n := strings.Count(logged.String(), "ByRoute found no route pattern"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logged.String())
	}
}

func TestByRouteInsideTheMuxNeitherWarnsNorFails(t *testing.T) {
	var logged strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)

	limit := ratelimit.New(ratelimit.PerMinute(10), ratelimit.ByRoute())
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
	for _, path := range []string{"/items/1", "/items/2"} {
		if resp := ratelimittest.Do(mux, ratelimittest.NewRequest("GET", path, "")); resp.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
		}
	}
	// Once a request has had a pattern, one without is an ordinary key
	// error: the generic 400, no hint, no log.
	key := ratelimit.ByRoute()
	req := ratelimittest.NewRequest("GET", "/items/1", "")
	req.Pattern = "GET /items/{id}"
	if k, err := key(req); err != nil || k != "GET /items/{id}" {
		t.Fatalf("key %q, %v", k, err)
	}
	_, err := key(ratelimittest.NewRequest("GET", "/x", ""))
	if !errors.Is(err, ratelimit.ErrNoKey) || strings.Contains(err.Error(), "inside the router") {
		t.Fatalf("error %v; want a plain ErrNoKey", err)
	}
	if logged.Len() != 0 {
		t.Fatalf("logged %q", logged.String())
	}
}
