package envoy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// A middleware rule named after the domain, keyed as the descriptor's
// counter (key_value_ per entry), on the same store with the same
// algorithm, shares the descriptor's bucket: one limit across the gateway
// and the application.
func TestGatewayDescriptorAndApplicationRuleShareOneBucket(t *testing.T) {
	clock := ratelimittest.NewClock(replayStart)
	store := memory.New(memory.WithClock(clock))
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), store)
	if err != nil {
		t.Fatal(err)
	}
	byClient := func(r *http.Request) (string, error) { return "client_" + r.Header.Get("X-Client") + "_", nil }
	app := ratelimit.NewLimiter(ratelimit.PerMinute(10), byClient, ratelimit.WithName("api"),
		ratelimit.WithStore(store), ratelimit.WithClock(clock))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Client", "a")
	for range 4 {
		if v := app.Check(r); !v.Allowed() {
			t.Fatalf("the application's check was denied: %v", v.Result())
		}
	}
	resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
	if got := resp.Statuses[0].LimitRemaining; got != 5 {
		t.Fatalf("remaining %d at the gateway after 4 application requests and this one, want 5", got)
	}
	if v := app.Check(r); v.Result().Remaining != 4 {
		t.Fatalf("the application sees %d remaining, want 4: the gateway's hit counts", v.Result().Remaining)
	}
}

// hits_addend 0 checks without charging. Under GCRA it is OVER_LIMIT
// once one more hit would not fit; under the reference's windows, as
// there, only once the count has passed the limit.
func TestZeroHitsChecksWithoutCharging(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opt          Option
		atLimit      ratelimitCode // the check with the count at the limit
		pastTheLimit ratelimitCode // with the count past it (charged only under the reference's windows)
	}{
		{"gcra", WithAlgorithm(ratelimit.GCRA), over, over},
		{"reference windows", WithReferenceWindows(), ok, over},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := newMemoryService(t, apiYAML, tc.opt)
			check := func() *ratelimitResponse {
				return mustCall(t, svc, zeroHits(request("api", [][]string{{"client", "a"}}, 1)))
			}
			mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 9))
			if resp := check(); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 1 {
				t.Fatalf("a check with one left: %v", resp)
			}
			mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
			if resp := check(); resp.OverallCode != tc.atLimit || resp.Statuses[0].LimitRemaining != 0 {
				t.Fatalf("a check at the limit: %v, want %v", resp, tc.atLimit)
			}
			mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
			if resp := check(); resp.OverallCode != tc.pastTheLimit || resp.Statuses[0].LimitRemaining != 0 {
				t.Fatalf("a check past the limit: %v, want %v", resp, tc.pastTheLimit)
			}
			if resp := check(); resp.OverallCode != tc.pastTheLimit {
				t.Fatalf("a second check changed the answer: the check charged something: %v", resp)
			}
		})
	}
}

// keyRecorder is a memory store that records the longest key it was sent.
type keyRecorder struct {
	*memory.Store
	longest int
}

func (k *keyRecorder) Take(ctx context.Context, req stores.Request) (stores.Result, error) {
	k.longest = max(k.longest, len(req.Key))
	return k.Store.Take(ctx, req)
}

// A descriptor value is the client's (a request header, say): however long
// it is, the key sent to the store is as short as the middleware's (a
// long key stands as its SHA-256, so a client cannot make Redis keep
// kilobyte keys), and the bucket is still the application rule's.
func TestLongDescriptorValueSharesTheBucketWithABoundedKey(t *testing.T) {
	clock := ratelimittest.NewClock(replayStart)
	store := &keyRecorder{Store: memory.New(memory.WithClock(clock))}
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), store)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("v", 4096)
	byClient := func(r *http.Request) (string, error) { return "client_" + r.Header.Get("X-Client") + "_", nil }
	app := ratelimit.NewLimiter(ratelimit.PerMinute(10), byClient, ratelimit.WithName("api"),
		ratelimit.WithStore(store), ratelimit.WithClock(clock))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Client", long)
	for range 4 {
		if v := app.Check(r); !v.Allowed() {
			t.Fatalf("the application's check was denied: %v", v.Result())
		}
	}
	resp := mustCall(t, svc, request("api", [][]string{{"client", long}}, 1))
	if got := resp.Statuses[0].LimitRemaining; got != 5 {
		t.Errorf("remaining %d at the gateway after 4 application requests and this one, want 5: one bucket", got)
	}
	if store.longest > 256 {
		t.Errorf("a key of %d bytes reached the store, want at most 256", store.longest)
	}
}
