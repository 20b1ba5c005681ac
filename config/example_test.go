package config_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
)

func Example() {
	reg := &config.Registry{
		Keys: map[string]ratelimit.KeyFunc{"tenant": ratelimit.ByHeader("X-Tenant")},
	}
	v1 := `
rules:
  - name: per-tenant
    key: tenant
    limit: 2/min
    algorithm: fixed-window
    overrides: {blocked-co: 0}
`
	cfg, err := config.Parse("rules.yaml", []byte(v1), reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	live := config.NewLive(cfg.Build())
	h := live.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func(tenant string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Tenant", tenant)
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(get("acme"), get("acme"), get("acme"), get("blocked-co"))

	// The limit is raised: acme's two requests still count.
	cfg, _ = config.Parse("rules.yaml", []byte(`
rules:
  - name: per-tenant
    key: tenant
    limit: 3/min
    algorithm: fixed-window
`), reg)
	live.Store(cfg.Build())
	fmt.Println(get("acme"), get("acme"))

	// A bad file compiles to nothing and says why.
	_, err = config.Parse("rules.yaml", []byte("rules:\n  - name: per-tenant\n    key: user\n    limit: 3/fortnight\n"), reg)
	fmt.Println(err)
	// Output:
	// 200 200 429 429
	// 200 429
	// rules.yaml:3:10: rules[0].key: unknown key "user" (the registry has [tenant])
	// rules.yaml:4:12: rules[0].limit: limit "3/fortnight": period "fortnight": use s, min, hour, day or a duration such as 30s
}
