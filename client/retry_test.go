package ratelimitclient_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// throttledOnce answers 429 with Retry-After: 1 to the first send, then 200.
func throttledOnce(n int, _ *http.Request) *http.Response {
	if n == 0 {
		return response(http.StatusTooManyRequests, "Retry-After", "1")
	}
	return response(http.StatusOK)
}

func TestNonIdempotentRequestsNeverRetried(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPatch, "CONNECT", "CUSTOM"} {
		t.Run(method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: throttledOnce}
				tr := &ratelimitclient.Transport{Base: base, MaxRetries: 5}
				req, _ := http.NewRequest(method, "http://api.test/", strings.NewReader("payload"))
				resp, err := send(tr, req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusTooManyRequests || base.count() != 1 {
					t.Fatalf("status %d after %d sends, want the 429 after exactly one send", resp.StatusCode, base.count())
				}
			})
		})
	}
}

func TestIdempotentRequestsRetriedWithRewoundBody(t *testing.T) {
	cases := map[string]func() *http.Request{
		"GET": func() *http.Request { return get("http://api.test/") },
		"PUT": func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, "http://api.test/", strings.NewReader("payload"))
			return r
		},
		"POST with Idempotency-Key": func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://api.test/", strings.NewReader("payload"))
			r.Header.Set("Idempotency-Key", "8e03978e")
			return r
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: throttledOnce}
				var mu sync.Mutex
				var kinds []ratelimitclient.EventKind
				tr := &ratelimitclient.Transport{Base: base, Observer: func(e ratelimitclient.Event) {
					mu.Lock()
					kinds = append(kinds, e.Kind)
					mu.Unlock()
				}}
				req := mk()
				resp, err := send(tr, req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK || base.count() != 2 {
					t.Fatalf("status %d after %d sends, want 200 after a retry", resp.StatusCode, base.count())
				}
				if d := base.callTimes()[1].Sub(base.callTimes()[0]); d < 1e9 {
					t.Errorf("retried after %v, before Retry-After (1s)", d)
				}
				if req.Body != nil && base.bodies[1] != "payload" {
					t.Errorf("retry sent body %q, want the rewound payload", base.bodies[1])
				}
				want := []ratelimitclient.EventKind{ratelimitclient.Throttled, ratelimitclient.Retried, ratelimitclient.Waited}
				if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
					t.Errorf("events %v, want %v", kinds, want)
				}
			})
		})
	}
}

func TestBodyWithoutGetBodyNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: throttledOnce}
		tr := &ratelimitclient.Transport{Base: base}
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/", strings.NewReader("payload"))
		req.GetBody = nil
		if resp, _ := send(tr, req); resp.StatusCode != http.StatusTooManyRequests || base.count() != 1 {
			t.Fatalf("a body that cannot be rewound was sent %d times", base.count())
		}
	})
}

func TestRetriesStayWithinBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusTooManyRequests, "Retry-After", "1")}
		var mu sync.Mutex
		counts := map[ratelimitclient.EventKind]int{}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: 3, Observer: func(e ratelimitclient.Event) {
			mu.Lock()
			counts[e.Kind]++
			mu.Unlock()
		}}
		const requests = 200
		for range requests {
			if _, err := send(tr, get("http://api.test/")); err != nil {
				t.Fatal(err)
			}
		}
		retries := base.count() - requests
		if limit := 1 + requests/10; retries > limit {
			t.Errorf("%d retries for %d requests, want at most %d (one plus 10%%)", retries, requests, limit)
		}
		if retries == 0 || counts[ratelimitclient.Retried] != retries {
			t.Errorf("%d retries, %d Retried events", retries, counts[ratelimitclient.Retried])
		}
		if counts[ratelimitclient.BudgetExhausted] == 0 {
			t.Error("no BudgetExhausted event")
		}
		t.Logf("%d requests, %d retries, %d budget-exhausted events", requests, retries, counts[ratelimitclient.BudgetExhausted])
	})
}

func TestMaxRetriesBoundsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusServiceUnavailable, "Retry-After", "1")}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: 1, RetryRatio: 1}
		resp, _ := send(tr, get("http://api.test/"))
		if resp.StatusCode != http.StatusServiceUnavailable || base.count() != 2 {
			t.Fatalf("status %d after %d sends, want the 503 after 2", resp.StatusCode, base.count())
		}
	})
}

func TestUnavailableWithoutRetryAfterIsNotAThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusServiceUnavailable)}
		tr := &ratelimitclient.Transport{Base: base, MaxWait: -1}
		for range 3 {
			if _, err := send(tr, get("http://api.test/")); err != nil {
				t.Fatal(err)
			}
		}
		if base.count() != 3 {
			t.Fatalf("%d sends, want 3: a plain 503 is neither retried nor blocking", base.count())
		}
	})
}

// GitHub answers its secondary rate limits with 403 and Retry-After.
func TestForbiddenWithRetryAfterIsAThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			if n == 0 {
				return response(http.StatusForbidden, "Retry-After", "30")
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base}
		resp, _ := send(tr, get("https://api.github.test/repos"))
		if resp.StatusCode != http.StatusOK || base.count() != 2 {
			t.Fatalf("status %d after %d sends, want 200 after a retry", resp.StatusCode, base.count())
		}
		if d := base.callTimes()[1].Sub(base.callTimes()[0]); d < 30e9 {
			t.Errorf("retried after %v, before Retry-After", d)
		}
		// A plain 403 is not a throttle.
		base2 := &fakeBase{respond: always(http.StatusForbidden)}
		tr2 := &ratelimitclient.Transport{Base: base2, MaxWait: -1}
		for range 3 {
			if resp, err := send(tr2, get("https://api.github.test/")); err != nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("plain 403: %v, %v", resp, err)
			}
		}
		if base2.count() != 3 {
			t.Errorf("plain 403 sent %d times for 3 requests", base2.count())
		}
	})
}
