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
