package main

import (
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestExample checks what the example promises, in virtual time: with a
// loud tenant flooding the 4 seats, a quiet tenant is served within about
// one request's time, health checks do not wait, and the loud tenant's
// excess is refused with a Retry-After.
func TestExample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const work = 200 * time.Millisecond
		h := newHandler(work)
		get := func(path, tenant string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", path, nil)
			r.Header.Set("X-Tenant", tenant)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec
		}
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				rec := get("/v1/items", "loud")
				mu.Lock()
				codes[rec.Code]++
				mu.Unlock()
				if rec.Code != 200 && rec.Header().Get("Retry-After") == "" {
					t.Errorf("refusal %d without Retry-After", rec.Code)
				}
			})
		}
		synctest.Wait()
		start := time.Now()
		if rec := get("/healthz", ""); rec.Code != 200 || time.Since(start) != 0 {
			t.Errorf("health check: %d after %v", rec.Code, time.Since(start))
		}
		if rec := get("/v1/items", "quiet"); rec.Code != 200 || time.Since(start) > 2*work {
			t.Errorf("quiet tenant: %d after %v, want 200 within %v", rec.Code, time.Since(start), 2*work)
		}
		wg.Wait()
		if codes[429] == 0 || codes[200] == 0 {
			t.Errorf("loud tenant: %v, want some served and some refused with 429", codes)
		}
	})
}
