package ratelimittest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func TestParseRateLimitForReadsTheNamedPolicyBehindNestedLimiters(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	login := ratelimit.New(ratelimit.PerMinute(5), ratelimit.ByIP(), ratelimit.WithName("login"), ratelimit.WithClock(clock))
	global := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(), ratelimit.WithName("per-ip"), ratelimit.WithClock(clock))
	h := global(login(http.NotFoundHandler()))
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("POST", "/login", ""))

	first, err := ratelimittest.ParseRateLimit(resp.Header)
	if err != nil || first.Policy != "per-ip" || first.Remaining != 99 {
		t.Fatalf("ParseRateLimit: %+v, %v; want the outer limiter's member", first, err)
	}
	rl, err := ratelimittest.ParseRateLimitFor(resp.Header, "login")
	if err != nil || rl.Policy != "login" || rl.Remaining != 4 || rl.Reset != 12*time.Second {
		t.Fatalf("ParseRateLimitFor(login): %+v, %v", rl, err)
	}
	all, err := ratelimittest.ParseRateLimits(resp.Header)
	if err != nil || len(all) != 2 || all[0].Policy != "per-ip" || all[1].Policy != "login" {
		t.Fatalf("ParseRateLimits: %+v, %v", all, err)
	}
	if _, err := ratelimittest.ParseRateLimitFor(resp.Header, "nope"); err == nil || !strings.Contains(err.Error(), `"login"`) {
		t.Fatalf("ParseRateLimitFor(nope): %v; want an error naming the policies present", err)
	}
}

func TestParseRateLimitsReadsEveryMemberOfOneLine(t *testing.T) {
	h := http.Header{"Ratelimit": {`"a";r=1;t=2, "b";r=0;t=30`}}
	rl, err := ratelimittest.ParseRateLimitFor(h, "b")
	if err != nil || rl.Remaining != 0 || rl.Reset != 30*time.Second {
		t.Fatalf("ParseRateLimitFor(b): %+v, %v", rl, err)
	}
	if first, err := ratelimittest.ParseRateLimit(h); err != nil || first.Policy != "a" {
		t.Fatalf("ParseRateLimit: %+v, %v", first, err)
	}
	for _, bad := range []string{`"a";r=1;t=2, garbage`, ``} {
		if _, err := ratelimittest.ParseRateLimits(http.Header{"Ratelimit": {bad}}); err == nil {
			t.Errorf("ParseRateLimits(%q) accepted", bad)
		}
	}
}

func TestGetSendsAGetFromTheDefaultPeer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Method+" "+r.URL.RequestURI()+" "+r.RemoteAddr)
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("body"))
	})
	resp := ratelimittest.Get(h, "/x?y=1")
	if want := "GET /x?y=1 " + ratelimittest.DefaultRemoteAddr; resp.Code != http.StatusTeapot || resp.Body != "body" || resp.Header.Get("X-Seen") != want {
		t.Fatalf("Get: %d %q %q; want 418, body and %q", resp.Code, resp.Body, resp.Header.Get("X-Seen"), want)
	}
}
