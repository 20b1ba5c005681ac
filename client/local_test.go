package ratelimitclient_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

func TestLocalLimitPacesSilentServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusOK)}
		tr := &ratelimitclient.Transport{Base: base, Local: ratelimit.PerSecond(10).WithBurst(1)}
		start := time.Now()
		var wg sync.WaitGroup
		for range 21 {
			wg.Go(func() { send(tr, get("http://api.test/")) })
		}
		wg.Wait()
		if d := time.Since(start); d < 2*time.Second {
			t.Errorf("21 requests at 10/s took %v, want >= 2s", d)
		}
		// Another partition has its own local limit.
		start = time.Now()
		send(tr, get("http://other.test/"))
		if d := time.Since(start); d != 0 {
			t.Errorf("another host waited %v", d)
		}
	})
}

func TestServerFieldsReplaceLocalLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusOK, "RateLimit", `"default";r=1000;t=1`)}
		tr := &ratelimitclient.Transport{Base: base, Local: ratelimit.PerMinute(1)}
		send(tr, get("http://api.test/"))
		start := time.Now()
		for range 10 {
			send(tr, get("http://api.test/"))
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("10 requests took %v: the local limit of 1/min still applied after the server's fields", d)
		}
	})
}

func TestPartitionFuncOverridesDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: func(_ int, req *http.Request) *http.Response {
			if strings.HasPrefix(req.URL.Path, "/search") {
				return response(http.StatusTooManyRequests, "Retry-After", "60")
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1, MaxWait: -1, Partition: func(r *http.Request) string {
			if strings.HasPrefix(r.URL.Path, "/search") {
				return r.URL.Host + " search"
			}
			return r.URL.Host + " core"
		}}
		send(tr, get("http://api.test/search?q=x"))
		if _, err := send(tr, get("http://api.test/repos")); err != nil {
			t.Fatalf("the core partition was blocked by the search one: %v", err)
		}
		if _, err := send(tr, get("http://api.test/search?q=y")); err == nil {
			t.Fatal("the search partition was not blocked")
		}
	})
}

func TestBadConfigPanics(t *testing.T) {
	for name, tr := range map[string]*ratelimitclient.Transport{
		"Adaptive without Local": {Adaptive: true},
		"invalid Local":          {Local: ratelimit.Limit{Rate: -1, Period: time.Second}},
		"RetryRatio above 1":     {RetryRatio: 2},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "ratelimit: ") {
					t.Fatalf("panic %v, want a ratelimit: message", r)
				}
			}()
			tr.RoundTrip(get("http://api.test/"))
		})
	}
}

// TestLocalLimitHoldsUnderContention: many goroutines in one partition,
// waiting out a throttle with jitter, reserve the local limit at times out
// of order. x/time/rate credits a reservation earlier than the latest with
// the time between them again (golang/go#71360 reports it admitting far
// past its limit under contention); the Transport must not. Every window
// of a second holds at most the limit's rate plus its burst.
func TestLocalLimitHoldsUnderContention(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "adaptive"}[adaptive], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
					if n == 0 {
						return response(http.StatusTooManyRequests, "Retry-After", "5")
					}
					return response(http.StatusOK)
				}}
				const rate, burst = 20, 5
				tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1, MaxWait: time.Hour,
					Local: ratelimit.PerSecond(rate).WithBurst(burst), Adaptive: adaptive}
				send(tr, get("http://api.test/"))
				var wg sync.WaitGroup
				for range 200 {
					wg.Go(func() {
						for range 3 {
							send(tr, get("http://api.test/"))
						}
					})
				}
				wg.Wait()
				calls := base.callTimes()[1:]
				limit := rate + burst
				if adaptive {
					limit = rate + 1 // adaptive mode paces with a burst of one, from a rate cut by the throttle
				}
				for i, c := range calls {
					n := 0
					for _, d := range calls[i:] {
						if d.Sub(c) < time.Second {
							n++
						}
					}
					if n > limit {
						t.Fatalf("%d sends in the second from %v, want at most %d (rate %d/s, burst %d)",
							n, c.Sub(calls[0]), limit, rate, burst)
					}
				}
			})
		})
	}
}
