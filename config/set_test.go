package config_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// thousandRules is a file of 1,000 rules, one per API version's subtree,
// plus a per-IP rule on every request and a writes rule on POSTs: a
// request to /api/vN/... matches 2 rules (3 if a POST).
func thousandRules() string { return versionRules(1000, "1000/min", "5/min", "2/min") }

// versionRules is thousandRules with n versions and the given limits.
func versionRules(n int, perIP, writes, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rules:\n  - name: per-ip\n    key: client_ip\n    limit: %s\n", perIP)
	fmt.Fprintf(&b, "  - name: writes\n    key: client_ip\n    limit: %s\n    algorithm: fixed-window\n    match: {methods: [POST]}\n", writes)
	for i := range n {
		fmt.Fprintf(&b, "  - name: v%d\n    key: tenant\n    limit: %s\n    algorithm: fixed-window\n    match: {routes: [\"/api/v%d/*\"]}\n", i, version, i)
	}
	b.WriteString("  - name: health\n    unlimited: true\n    match: {routes: [/status]}\n")
	return b.String()
}

func TestThousandRuleFileServesEachRequestByTheRulesThatMatchIt(t *testing.T) {
	cfg, err := config.Parse("big.yaml", []byte(thousandRules()), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.Build()
	if set.Rules() != 1002 {
		t.Fatalf("%d rules", set.Rules())
	}
	h := set.Handler(okHandler)
	do := func(method, path, tenant string) int {
		return ratelimittest.Do(h, ratelimittest.NewRequest(method, path, "10.0.0.1:1", "X-Tenant", tenant)).Code
	}
	// Each version's rule counts its own requests only.
	for _, v := range []int{0, 7, 999} {
		path := fmt.Sprintf("/api/v%d/items", v)
		if a, b, c := do("GET", path, "t"), do("GET", path, "t"), do("GET", path, "t"); a != 200 || b != 200 || c != 429 {
			t.Fatalf("%s: %d %d %d, want 200 200 429", path, a, b, c)
		}
	}
	// A denied request consumed nothing from the per-ip rule, and a POST
	// is checked against three rules, all or nothing.
	l := set.Limiter(ratelimittest.NewRequest("POST", "/api/v5/x", "10.0.0.1:1"))
	for _, name := range []string{"per-ip", "writes", "v5"} {
		if _, err := l.Peek(context.Background(), name, "10.0.0.1"); err != nil {
			t.Fatalf("the Limiter of POST /api/v5/x lacks %s: %v", name, err)
		}
	}
	for _, name := range []string{"v4", "v6", "health"} {
		if _, err := l.Peek(context.Background(), name, "t"); !errors.Is(err, ratelimit.ErrUnknownRule) {
			t.Fatalf("the Limiter of POST /api/v5/x holds %s: %v", name, err)
		}
	}
	res, err := set.Peek(context.Background(), "per-ip", "10.0.0.1")
	if err != nil || res.Remaining != 1000-6 {
		t.Fatalf("per-ip after 6 admitted of 9: %+v %v", res, err)
	}
	if a, b, c := do("POST", "/api/v5/x", "t"), do("POST", "/api/v5/x", "t"), do("POST", "/api/v5/x", "t"); a != 200 || b != 200 || c != 429 {
		t.Fatalf("POSTs: %d %d %d", a, b, c)
	}
	res, _ = set.Peek(context.Background(), "writes", "10.0.0.1")
	if res.Remaining != 3 { // the third POST was denied by v5: writes gave its unit back
		t.Fatalf("writes after 2 admitted POSTs and 1 denied: %d remaining, want 3", res.Remaining)
	}
	for range 50 { // no rule limits /status, and per-ip does not count it
		if c := do("GET", "/status", "t"); c != 200 {
			t.Fatalf("/status: %d", c)
		}
	}
	if res, _ := set.Peek(context.Background(), "per-ip", "10.0.0.1"); res.Remaining != 1000-8 {
		t.Fatalf("per-ip counted skipped requests: %d remaining", res.Remaining)
	}
}

// TestRequestsThatCouldMatchTooManyRulesAreRejected: the bound is on the
// rules one request can match, not on the file, and the problem points at
// the rule that crosses it.
func TestRequestsThatCouldMatchTooManyRulesAreRejected(t *testing.T) {
	rule := func(i int, match string) string {
		return fmt.Sprintf("  - name: r%d\n    key: tenant\n    limit: 5/s\n    match: %s\n", i, match)
	}
	var ok, bad strings.Builder
	ok.WriteString("rules:\n")
	bad.WriteString("rules:\n")
	for i := range config.MaxRules {
		ok.WriteString(rule(i, `{routes: ["/api/*"]}`))
		bad.WriteString(rule(i, `{routes: ["/api/*"]}`))
	}
	// Disjoint from the others: fine. Overlapping on POST /api/orders: not.
	ok.WriteString(rule(100, `{routes: ["/admin/*"]}`))
	bad.WriteString(rule(101, `{routes: ["/api/orders"], methods: [POST]}`))
	if _, err := config.Parse("ok.yaml", []byte(ok.String()), testRegistry(t, nil)); err != nil {
		t.Fatalf("%d overlapping rules and a disjoint one: %v", config.MaxRules, err)
	}
	_, err := config.Parse("bad.yaml", []byte(bad.String()), testRegistry(t, nil))
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	line := 2 + 4*config.MaxRules
	want := fmt.Sprintf("bad.yaml:%d:5: rules[%d]: a request such as POST /api/orders can match %d rules", line, config.MaxRules, config.MaxRules+1)
	if !strings.HasPrefix(errs[0].String(), want) {
		t.Fatalf("got  %s\nwant %s...", errs[0], want)
	}
}

// TestRequestsThatCouldMatchTooManyExemptionsAreRejected: unlimited rules
// are exemptions every request they can match is tested against, so they
// are bounded per request like limited rules (apart from them): without the
// bound, a file of thousands of unlimited rules on every path compiled and
// then ran every predicate on every request.
func TestRequestsThatCouldMatchTooManyExemptionsAreRejected(t *testing.T) {
	skip := func(i int) string {
		return fmt.Sprintf("  - name: s%d\n    unlimited: true\n    match: {when: [from_lb]}\n", i)
	}
	var ok, bad strings.Builder
	ok.WriteString("rules:\n  - {name: per-ip, key: client_ip, limit: 5/s}\n")
	bad.WriteString("rules:\n  - {name: per-ip, key: client_ip, limit: 5/s}\n")
	for i := range config.MaxRules {
		ok.WriteString(skip(i))
		bad.WriteString(skip(i))
	}
	bad.WriteString(skip(config.MaxRules))
	if _, err := config.Parse("ok.yaml", []byte(ok.String()), testRegistry(t, nil)); err != nil {
		t.Fatalf("%d unlimited rules on every request: %v", config.MaxRules, err)
	}
	_, err := config.Parse("bad.yaml", []byte(bad.String()), testRegistry(t, nil))
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	line := 3 + 3*config.MaxRules
	want := fmt.Sprintf("bad.yaml:%d:5: rules[%d]: a request such as GET * can match %d unlimited rules", line, config.MaxRules+1, config.MaxRules+1)
	if !strings.HasPrefix(errs[0].String(), want) {
		t.Fatalf("got  %s\nwant %s...", errs[0], want)
	}
}

// TestRulesCheckWhatTheIndexDoesNotDecide: the index counts a glob segment
// as any segment and does not look at headers or predicates, so a rule of a
// group still checks those itself.
func TestRulesCheckWhatTheIndexDoesNotDecide(t *testing.T) {
	src := `
rules:
  - {name: v1, key: client_ip, limit: 1/min, match: {routes: ["/api/v1*"]}}
  - {name: keyed, key: client_ip, limit: 1/min, match: {routes: [/keyed], headers: [X-API-Key]}}
  - {name: lb, key: client_ip, limit: 1/min, match: {routes: [/lb], when: [from_lb]}}
`
	cfg, err := config.Parse("g.yaml", []byte(src), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Build().Handler(okHandler)
	do := func(path string, hdr ...string) int {
		return ratelimittest.Do(h, ratelimittest.NewRequest("GET", path, "10.0.0.1:1", hdr...)).Code
	}
	for _, c := range []struct {
		path    string
		hdr     []string
		limited bool
	}{
		{"/api/v2", nil, false}, {"/api/v1x", nil, true},
		{"/keyed", nil, false}, {"/keyed", []string{"X-API-Key", "k"}, true},
		{"/lb", nil, false}, {"/lb", []string{"X-LB", "1"}, true},
	} {
		a, b := do(c.path, c.hdr...), do(c.path, c.hdr...)
		if a != 200 || (b == 429) != c.limited {
			t.Errorf("%s %v: %d then %d, want limited=%v", c.path, c.hdr, a, b, c.limited)
		}
	}
}

// TestPeekReadsAnOverriddenKeyUnderItsOwnLimit: Peek (and so the admin
// handler) reports a key with an override as the middleware decides it:
// a blocked key is not allowed, and a key with its own limit of 5/min
// that has used 3 has 2 left (under the rule's 2/min it would read as
// exhausted).
func TestPeekReadsAnOverriddenKeyUnderItsOwnLimit(t *testing.T) {
	src := `
rules:
  - name: writes
    key: tenant
    limit: 2/min
    overrides: {big: 5/min, bad: 0, vip: unlimited}
`
	cfg, err := config.Parse("inline.yaml", []byte(src), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.Build()
	h := set.Handler(okHandler)
	for range 3 {
		if c := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Tenant", "big")).Code; c != 200 {
			t.Fatalf("big: status %d", c)
		}
	}
	if c := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Tenant", "bad")).Code; c != 429 {
		t.Fatalf("bad: status %d; want 429", c)
	}
	ctx := t.Context()
	if res, err := set.Peek(ctx, "writes", "big"); err != nil || !res.Allowed || res.Remaining != 2 || res.Limit != ratelimit.PerMinute(5) {
		t.Errorf("Peek(big) after 3 of its 5/min: %+v, %v; want allowed, 2 remaining of 5/min", res, err)
	}
	if res, err := set.Peek(ctx, "writes", "bad"); err != nil || res.Allowed || res.Remaining != 0 || res.RetryAfter != 0 {
		t.Errorf("Peek(bad), a blocked key: %+v, %v; want not allowed, nothing left, no Retry-After", res, err)
	}
	if res, err := set.Peek(ctx, "writes", "vip"); err != nil || !res.Allowed || res.Limit != (ratelimit.Limit{}) {
		t.Errorf("Peek(vip), an unlimited key: %+v, %v; want allowed with no limit", res, err)
	}
	if res, err := set.Peek(ctx, "writes", "small"); err != nil || !res.Allowed || res.Remaining != 2 || res.Limit != ratelimit.PerMinute(2) {
		t.Errorf("Peek(small), no override: %+v, %v; want the rule's 2/min, untouched", res, err)
	}
}

// A rules file whose rules all fail closed can be built with
// ratelimit.WithErrorHandler, which a Limiter refuses unless one of its
// rules fails closed: the Set's own Limiter for unclean paths, whose rule
// never reaches a store, does not stand in the way.
func TestSetOfRulesFailingClosedTakesAnErrorHandler(t *testing.T) {
	src := "version: 1\nrules:\n  - name: a\n    key: client_ip\n    limit: 1/s\n    on_store_error: closed\n"
	cfg, err := config.Parse("f.yaml", []byte(src), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Build with WithErrorHandler panicked: %v", r)
		}
	}()
	set := cfg.Build(ratelimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	if set.Rules() != 1 {
		t.Fatalf("Rules() = %d, want 1", set.Rules())
	}
}
