package config_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func TestFullFileCompilesAndEnforces(t *testing.T) {
	cfg, err := config.Load("testdata/full.yaml", testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) != 5 {
		t.Fatalf("%d rules, want 5 limited rules", len(cfg.Rules))
	}
	h := cfg.Build().Handler(okHandler)
	do := func(method, target, tenant string, hdr ...string) int {
		return ratelimittest.Do(h, ratelimittest.NewRequest(method, target, "10.0.0.1:1", append([]string{"X-Tenant", tenant}, hdr...)...)).Code
	}
	// writes: 10 per second for an ordinary tenant.
	n := 0
	for do("POST", "/api/items", "t1") == 200 {
		n++
		if n > 50 {
			break
		}
	}
	if n != 10 {
		t.Errorf("tenant t1 got %d writes, want 10", n)
	}
	// GETs do not match the writes rule.
	if c := do("GET", "/api/items", "t1"); c != 200 {
		t.Errorf("GET after the writes limit: %d", c)
	}
	// acme has its own limit of 100 (the per-ip burst of 20 binds first).
	n = 0
	for do("POST", "/api/items", "acme") == 200 {
		n++
		if n > 50 {
			break
		}
	}
	if n != 9 { // per-ip: 20 burst, 11 already used above
		t.Errorf("acme got %d writes before the per-ip limit, want 9", n)
	}
}

func TestOverridesBlockExemptAndRaise(t *testing.T) {
	src := `
rules:
  - name: writes
    key: tenant
    limit: 2/min
    overrides:
      - key: big
        limit: 5/min
      - keys: [bad]
        limit: 0
      - key: free
        limit: unlimited
  - name: compact
    key: tenant
    limit: 100/min
    overrides: {free: unlimited, bad2: 0, small: 1/min}
`
	cfg, err := config.Parse("inline.yaml", []byte(src), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Build().Handler(okHandler)
	admitted := func(tenant string) int {
		n := 0
		for range 20 {
			if ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Tenant", tenant)).Code == 200 {
				n++
			}
		}
		return n
	}
	for tenant, want := range map[string]int{"other": 2, "big": 5, "bad": 0, "free": 20, "bad2": 0, "small": 1} {
		if got := admitted(tenant); got != want {
			t.Errorf("tenant %q: %d of 20 admitted, want %d", tenant, got, want)
		}
	}
}

func TestJSONFilesParseToo(t *testing.T) {
	src := `{"version": 1, "rules": [{"name": "ip", "key": "client_ip", "limit": "5/s"}]}`
	cfg, err := config.Parse("rules.json", []byte(src), testRegistry(t, nil))
	if err != nil || len(cfg.Rules) != 1 || cfg.Rules[0].Limit != ratelimit.PerSecond(5) {
		t.Fatalf("%+v %v", cfg, err)
	}
	_, err = config.Parse("rules.json", []byte(`{"rules": [{"name": "ip", "key": "nope", "limit": "5/s"}]}`), testRegistry(t, nil))
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != 1 || errs[0].Col != 34 {
		t.Fatalf("%v", err)
	}
}

func TestBadFileReturnsNoConfigAndErrInvalid(t *testing.T) {
	data, _ := os.ReadFile("testdata/full.yaml")
	cfg, err := config.Parse("x.yaml", append(data, "  - name: per-ip\n    key: client_ip\n    limit: 1/s\n"...), testRegistry(t, nil))
	if cfg != nil || !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("cfg %v err %v", cfg, err)
	}
}

// TestDocsRulesFileCompiles keeps the complete file of docs/config.md in
// step with the parser.
func TestDocsRulesFileCompiles(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "```yaml\n")
	block, _, _ := strings.Cut(rest, "```")
	cfg, err := config.Parse("docs/config.md", []byte(block), testRegistry(t, nil))
	if err != nil || len(cfg.Rules) != 5 {
		t.Fatalf("%v", err)
	}
}

func TestUnlimitedRuleSkipsMatchingRequestsOnly(t *testing.T) {
	src := `
rules:
  - name: per-ip
    key: client_ip
    limit: 1/min
  - name: health
    unlimited: true
    match: {routes: ["/status"], when: [from_lb]}
`
	cfg, err := config.Parse("u.yaml", []byte(src), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Build().Handler(okHandler)
	for i := range 5 {
		if c := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/status", "10.0.0.1:1", "X-LB", "1")).Code; c != 200 {
			t.Fatalf("health check %d from the LB: %d", i, c)
		}
	}
	codes := []int{}
	for _, path := range []string{"/status", "/status", "/api"} { // not from the LB: limited
		codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", path, "10.0.0.1:1")).Code)
	}
	if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 {
		t.Fatalf("codes %v, want [200 429 429]", codes)
	}
}

// A hostile file nested millions of levels deep (8 MB, under MaxFileSize)
// is a syntax error: the parse neither recurses without bound (a stack
// overflow kills the process, recover cannot catch it) nor succeeds.
func TestParseRejectsDeepNestingWithoutCrashing(t *testing.T) {
	for name, src := range map[string]string{
		"flow":  "rules: " + strings.Repeat("[", 4<<20) + strings.Repeat("]", 4<<20) + "\n",
		"block": "rules:\n" + strings.Repeat("- ", 4<<20) + "a\n",
	} {
		_, err := config.Parse("deep.yaml", []byte(src), testRegistry(t, nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "depth") {
			t.Errorf("%s: %v, want a syntax error about depth", name, err)
		}
	}
}

// TestParseRefusesAliasesSoNoFileExpands: YAML anchors and aliases let a
// few hundred bytes stand for a document of billions of nodes ("billion
// laughs"), and a merge key (<<: *r) lets one rule copy another unseen. A
// rules file has neither: every alias, wherever it stands, is a problem
// of the file, reported without expanding anything.
func TestParseRefusesAliasesSoNoFileExpands(t *testing.T) {
	var laughs strings.Builder
	laughs.WriteString("rules:\n  - name: a\n    key: tenant\n    limit: 1/s\n    match:\n      headers: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&laughs, "      when: &l%d [%s]\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	for name, src := range map[string]string{
		"a rule by alias": "rules:\n  - &r {name: a, key: tenant, limit: 1/s}\n  - *r\n",
		"merge key":       "rules:\n  - &r {name: a, key: tenant, limit: 1/s}\n  - {<<: *r, name: b}\n",
		"a route by alias": "rules:\n  - {name: a, key: tenant, limit: 1/s, match: {routes: &p [/a]}}\n" +
			"  - {name: b, key: tenant, limit: 1/s, match: {routes: *p}}\n",
		"a billion laughs": laughs.String(),
	} {
		_, err := config.Parse("hostile.yaml", []byte(src), testRegistry(t, nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "alias") && !strings.Contains(err.Error(), `unknown field "<<"`) {
			t.Errorf("%s: %v; want a problem naming the alias (or the merge key)", name, err)
		}
	}
}

// TestLoadRefusesAFileOverMaxFileSize: Load (and so Watch) reads at most
// MaxFileSize bytes; a longer file is an error, even when its first bytes
// are valid rules, and is never parsed.
func TestLoadRefusesAFileOverMaxFileSize(t *testing.T) {
	valid := "rules:\n  - {name: a, key: tenant, limit: 1/s}\n"
	line := "#" + strings.Repeat("x", 1022) + "\n"
	name := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(name, []byte(valid+strings.Repeat(line, config.MaxFileSize/len(line))), 0o600); err != nil {
		t.Fatal(err)
	}
	var tooBig *http.MaxBytesError
	if _, err := config.Load(name, testRegistry(t, nil)); !errors.As(err, &tooBig) {
		t.Fatalf("Load of a file over MaxFileSize: %v; want a *http.MaxBytesError", err)
	}
}

// TestRuleWhoseRoutesIndexAlikeBuilds: two globs of one rule that the
// index reads as the same path ("/a/v1*" and "/a/v2*" are both "/a/*"
// there) put the rule in its group once; the rule used to be there twice,
// and Build panicked on a valid file.
func TestRuleWhoseRoutesIndexAlikeBuilds(t *testing.T) {
	cfg, err := config.Parse("globs.yaml", []byte(`
rules:
  - {name: v, key: tenant, limit: 1/hour, match: {routes: ["/a/v1*", "/a/v2*", "/b/*", "/b/*"]}}
`), testRegistry(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Build().Handler(okHandler)
	var codes []int
	for _, p := range []string{"/a/v1x", "/a/v2x", "/a/v3x", "/b/c"} {
		codes = append(codes, ratelimittest.Do(h, ratelimittest.NewRequest("GET", p, "10.0.0.1:1", "X-Tenant", "acme")).Code)
	}
	if want := []int{200, 429, 200, 429}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v: one bucket for the rule's routes, /a/v3x unmatched", codes, want)
	}
}
