package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestExample checks what the example promises: limits from the file, a
// raised limit applied by a reload with the counters kept, a bad file
// rejected whole, and the admin handler.
func TestExample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(initialRules), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := newApp(path, time.Hour) // reloads come from Reload below
	if err != nil {
		t.Fatal(err)
	}
	defer a.watcher.Close()
	get := func() int {
		return ratelimittest.Do(a.handler, ratelimittest.NewRequest("GET", "/api/items", "192.0.2.1:1")).Code
	}
	post := func(tenant string) int {
		return ratelimittest.Do(a.handler, ratelimittest.NewRequest("POST", "/api/items", "192.0.2.2:1", "X-Tenant", tenant)).Code
	}
	ratelimittest.ExpectLimitedAt(t, a.handler, 6, func() *http.Request { return ratelimittest.NewRequest("GET", "/api/items", "192.0.2.1:1") })
	if c := post("abuser"); c != 429 {
		t.Fatalf("blocked tenant: %d", c)
	}
	if a, b, c := post("t1"), post("t1"), post("t1"); a != 200 || b != 200 || c != 429 {
		t.Fatalf("writes: %d %d %d", a, b, c)
	}

	raised := strings.Replace(initialRules, "limit: 5/min", "limit: 8/min", 1)
	os.WriteFile(path, []byte(raised), 0o644)
	if err := a.watcher.Reload(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // 5 counted of 8
		if c := get(); c != 200 {
			t.Fatalf("request %d after raising 5 to 8: %d", i, c)
		}
	}
	if c := get(); c != 429 {
		t.Fatalf("counters were not kept: %d", c)
	}

	os.WriteFile(path, []byte(strings.Replace(raised, "key: tenant", "key: user", 1)), 0o644)
	if err := a.watcher.Reload(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "rules.yaml:11:10") {
		t.Fatalf("bad file: %v", err)
	}
	if c := post("t2"); c != 200 { // the old rules stay
		t.Fatalf("after a bad file: %d", c)
	}

	admin := func(method string) int {
		return ratelimittest.Do(a.handler, ratelimittest.NewRequest(method, "/admin/ratelimit?rule=per-ip&key=192.0.2.1", "")).Code
	}
	if c := admin("GET"); c != 200 {
		t.Fatalf("peek: %d", c)
	}
	if c := admin("POST"); c != 204 {
		t.Fatalf("reset: %d", c)
	}
	if c := get(); c != 200 {
		t.Fatalf("after a reset: %d", c)
	}
}
