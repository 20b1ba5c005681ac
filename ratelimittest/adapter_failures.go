package ratelimittest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

var errAdapterStore = errors.New("ratelimittest: store down")

func (a Adapter) testStoreFailure(t *testing.T) {
	down := ratelimit.WithStore(FailingStore{Err: errAdapterStore})
	t.Run("FailOpen", func(t *testing.T) {
		var hs handlers
		h := a.Router(ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), down, still()), Route{"GET", "/x", hs.named("/x")})
		for i := range 3 {
			if resp := send(h, "GET", "/x"); resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
				t.Fatalf("request %d: %d %v; want 200 without RateLimit fields", i+1, resp.Code, resp.Header)
			}
		}
		hs.expectCalls(t, 3, "fail open")
	})
	t.Run("FailClosed", func(t *testing.T) {
		var hs handlers
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}}}, down, still())
		h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
		if resp := send(h, "GET", "/x"); resp.Code != http.StatusServiceUnavailable {
			t.Fatalf("%d %q; want 503", resp.Code, resp.Body)
		}
		hs.expectCalls(t, 0, "fail closed")
	})
}

func (a Adapter) testKeyError(t *testing.T) {
	noKey := func(*http.Request) (string, error) {
		return "", fmt.Errorf("%w: no tenant header", ratelimit.ErrNoKey)
	}
	for _, tc := range []struct {
		status int
		opts   []ratelimit.Option
	}{
		{http.StatusBadRequest, nil},
		{http.StatusUnauthorized, []ratelimit.Option{ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: http.StatusUnauthorized})}},
	} {
		var hs handlers
		l := ratelimit.NewLimiter(ratelimit.PerMinute(5), noKey, append(tc.opts, still())...)
		h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
		checkProblem(t, send(h, "GET", "/x"), tc.status, "")
		hs.expectCalls(t, 0, fmt.Sprintf("key error answered %d", tc.status))
	}
}

func (a Adapter) testSkip(t *testing.T) {
	var hs handlers
	internal := func(r *http.Request) bool { return r.Header.Get("X-Internal-Probe") == "1" }
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithSkip(internal), still())
	h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
	ExpectLimitedAt(t, h, 2, gets("/x"))
	for i := range 3 {
		resp := send(h, "GET", "/x", "X-Internal-Probe", "1")
		if resp.Code != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("skipped request %d: %d %v; want 200 without RateLimit fields", i+1, resp.Code, resp.Header)
		}
	}
	hs.expectCalls(t, 4, "one admitted and three skipped requests")
}

// testConcurrency checks that a Concurrency slot is held while the
// handler runs (a request sent from inside it is denied) and released
// when it returns or panics.
func (a Adapter) testConcurrency(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(map[bool]string{false: "Return", true: "Panic"}[panics], func(t *testing.T) {
			var h http.Handler
			inner := 0
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("nested") != "" {
					return
				}
				inner = send(h, "GET", "/slow?nested=1").Code
				if panics {
					panic("ratelimittest: handler panics")
				}
			})
			l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Key: ratelimit.ByIP(), Algorithm: ratelimit.Concurrency}}, still())
			h = a.Router(l, Route{"GET", "/slow", slow})
			code, panicked := serveRecover(h, NewRequest("GET", "/slow", ""))
			if inner != http.StatusTooManyRequests {
				t.Fatalf("request sent while the only slot is held: %d, want 429", inner)
			}
			if !panics && (code != http.StatusOK || panicked != nil) {
				t.Fatalf("first request: %d, panic %v; want 200", code, panicked)
			}
			if resp := send(h, "GET", "/slow?nested=1"); resp.Code != http.StatusOK {
				t.Fatalf("after the first request ended: %d, want 200 (slot released)", resp.Code)
			}
		})
	}
}

// serveRecover serves r with h and returns the status, or what h panicked
// with (routers without a recovery middleware let a handler's panic out).
func serveRecover(h http.Handler, r *http.Request) (code int, panicked any) {
	defer func() { panicked = recover() }()
	return Do(h, r).Code, nil
}
