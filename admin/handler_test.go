package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/admin"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

func TestAdminHandlerPeeksAndResets(t *testing.T) {
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "ip", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByHeader("X-Key")}}, ratelimit.WithClock(clock))
	rl := ratelimit.NewReloadable(l)
	h := admin.NewHandler(rl)
	for range 2 {
		ratelimittest.Do(rl.Handler(ok), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", "a b"))
	}
	do := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w
	}
	w := do("GET", "/?rule=ip&key=a+b")
	var body struct {
		Rule      string `json:"rule"`
		Allowed   bool   `json:"allowed"`
		Remaining int    `json:"remaining"`
		Rate      int    `json:"rate"`
	}
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &body) != nil ||
		body.Rule != "ip" || body.Allowed || body.Remaining != 0 || body.Rate != 2 {
		t.Fatalf("peek: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/?rule=ip&key=a+b"); w.Code != 204 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/?rule=ip&key=a+b"); w.Code != 200 || !strings.Contains(w.Body.String(), `"remaining":2`) {
		t.Fatalf("peek after reset: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/?rule=nope&key=x", 404},
		{"POST", "/?rule=nope&key=x", 404},
		{"GET", "/?key=x", 400},
		{"GET", "/?rule=ip", 400},
		{"DELETE", "/?rule=ip&key=x", 405},
	} {
		if w := do(c.method, c.target); w.Code != c.code || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %q, want %d problem", c.method, c.target, w.Code, w.Header().Get("Content-Type"), c.code)
		}
	}
}

// TestAdminHandlerRefusesCrossOriginReset: a page on another site that
// submits a form to the admin handler makes the administrator's browser
// POST with the administrator's cookie. The handler refuses it (403) as
// http.CrossOriginProtection does, and the key stays limited; a same-origin
// POST and one from a client that is not a browser still reset.
func TestAdminHandlerRefusesCrossOriginReset(t *testing.T) {
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "ip", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByHeader("X-Key")}}, ratelimit.WithClock(clock))
	h := admin.NewHandler(l)
	exhaust := func() {
		ratelimittest.Do(l.Handler(ok), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", "k"))
		if res, err := l.Peek(context.Background(), "ip", "k"); err != nil || res.Remaining != 0 {
			t.Fatalf("peek before reset: %+v %v", res, err)
		}
	}
	post := func(header ...string) *http.Request {
		r := httptest.NewRequest("POST", "https://admin.example/ratelimit?rule=ip&key=k", strings.NewReader("x=1"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Cookie", "session=admin")
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	for _, c := range []struct {
		name string
		req  *http.Request
		code int
	}{
		{"cross-site form", post("Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"), http.StatusForbidden},
		{"same-site other origin", post("Sec-Fetch-Site", "same-site", "Origin", "https://blog.admin.example"), http.StatusForbidden},
		{"Origin only (older browser)", post("Origin", "https://evil.example"), http.StatusForbidden},
		{"same origin", post("Sec-Fetch-Site", "same-origin", "Origin", "https://admin.example"), http.StatusNoContent},
		{"not a browser", post(), http.StatusNoContent},
	} {
		exhaust()
		stdlib := http.StatusNoContent
		if http.NewCrossOriginProtection().Check(c.req) != nil {
			stdlib = http.StatusForbidden
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, c.req)
		if w.Code != c.code || stdlib != c.code {
			t.Errorf("%s: %d %s (CrossOriginProtection: %d), want %d", c.name, w.Code, w.Body, stdlib, c.code)
		}
		res, err := l.Peek(context.Background(), "ip", "k")
		if reset := err == nil && res.Remaining == 1; reset != (c.code == http.StatusNoContent) {
			t.Errorf("%s: after a %d the key has %+v %v", c.name, w.Code, res, err)
		}
	}
}

// failingInspector answers every Peek and Reset with err.
type failingInspector struct{ err error }

func (f failingInspector) Peek(context.Context, string, string) (ratelimit.Result, error) {
	return ratelimit.Result{}, f.err
}
func (f failingInspector) Reset(context.Context, string, string) error { return f.err }

// TestHandlerStatusFollowsTheWrappedError: the handler tells its errors
// apart with errors.Is, so an Inspector's error that wraps one of the
// limiter's sentinels (as Peek and Reset wrap them, with the rule's name)
// gets that sentinel's status, and any other error is the store's: 502.
func TestHandlerStatusFollowsTheWrappedError(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w %q", ratelimit.ErrUnknownRule, "r"), http.StatusNotFound},
		{fmt.Errorf("%w: %T", ratelimit.ErrResetUnsupported, struct{}{}), http.StatusNotImplemented},
		{fmt.Errorf("%w: bad limit", ratelimit.ErrInvalidRequest), http.StatusBadRequest},
		{fmt.Errorf("rule: %w", ratelimit.ErrInvalidLimit), http.StatusBadRequest},
		{fmt.Errorf("%w: redis: i/o timeout", ratelimit.ErrStoreUnavailable), http.StatusBadGateway},
		{errors.New("anything else"), http.StatusBadGateway},
	} {
		for _, method := range []string{"GET", "POST"} {
			w := httptest.NewRecorder()
			admin.NewHandler(failingInspector{c.err}).ServeHTTP(w, httptest.NewRequest(method, "/?rule=r&key=k", nil))
			if w.Code != c.code || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s with %v: %d %q, want %d problem", method, c.err, w.Code, w.Header().Get("Content-Type"), c.code)
			}
		}
	}
}
