package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func ExampleNew() {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })

	// Three requests a minute per client IP.
	limit := ratelimit.New(ratelimit.PerMinute(3), ratelimit.ByIP())
	h := limit(hello)

	for i := 1; i <= 4; i++ {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:4711"))
		fmt.Printf("%d %s retry-after=%q\n", resp.Code, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 "ip-3-per-1m";r=2;t=20 retry-after=""
	// 200 "ip-3-per-1m";r=1;t=20 retry-after=""
	// 200 "ip-3-per-1m";r=0;t=20 retry-after=""
	// 429 "ip-3-per-1m";r=0;t=20 retry-after="20"
}

func ExampleNewRules() {
	clock := ratelimittest.NewClock(time.Time{})
	mw := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "per-ip", Limit: ratelimit.PerMinute(100), Key: ratelimit.ByIP()},
		{Name: "daily", Quota: ratelimit.Daily(2, time.UTC), Key: ratelimit.ByAPIKey("X-API-Key")},
	}, ratelimit.WithClock(clock))
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for i := 1; i <= 3; i++ {
		req := ratelimittest.NewRequest("GET", "/", "", "X-API-Key", "k-123")
		resp := ratelimittest.Do(h, req)
		fmt.Println(resp.Code, resp.Header.Get("RateLimit"))
	}
	fmt.Println(ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-API-Key", "k-123")).Header.Get("RateLimit-Policy"))
	// Output:
	// 200 "daily";r=1;t=86400
	// 200 "daily";r=0;t=86400
	// 429 "daily";r=0;t=86400
	// "per-ip";q=100;w=60, "daily";q=2;w=86400
}

func ExampleLimiter_Allow() {
	// Five login attempts per username per hour, checked inside the handler
	// once the body has been parsed; a successful login gives its attempt back.
	clock := ratelimittest.NewClock(time.Time{}) // a real service omits WithClock
	attempts := ratelimit.NewLimiter(ratelimit.PerHour(5), ratelimit.Global(), ratelimit.WithName("login"), ratelimit.WithClock(clock))
	ctx := context.Background()

	for i := 0; i < 6; i++ {
		res, err := attempts.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		if !res.Allowed {
			fmt.Println("locked out; retry in", res.RetryAfter)
		}
	}
	attempts.Return(ctx, "alice", 1) // that last good password
	res, _ := attempts.AllowN(ctx, "alice", 0)
	fmt.Println("remaining:", res.Remaining)
	// Output:
	// locked out; retry in 12m0s
	// remaining: 1
}
