package envoy

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// fixedStore decides every take with res, allocating nothing: what a call
// allocates beside it is the service's own.
type fixedStore struct{ res stores.Result }

func (f *fixedStore) Take(context.Context, stores.Request) (stores.Result, error) { return f.res, nil }
func (f *fixedStore) TakeAll(_ context.Context, _ []stores.Request, rs []stores.Result) error {
	for i := range rs {
		rs[i] = f.res
	}
	return nil
}
func (f *fixedStore) Return(context.Context, stores.Request) error { return nil }

// A call with one descriptor allocates no more than its response needs:
// the response, its status and reset duration, the two or three fields and
// their values, and the decision's bookkeeping; no goroutine fan-out for a
// lone descriptor.
func TestShouldRateLimitAllocatesLittlePerCall(t *testing.T) {
	rules := compileYAML(t, "bench.yaml", benchAllowYAML)
	req := request("allow", [][]string{{"user", "42"}}, 1)
	for _, tc := range []struct {
		name string
		res  stores.Result
		max  float64
	}{
		{"allowed", stores.Result{Allowed: true, Remaining: 9, ResetAfter: time.Second}, 9},
		{"denied", stores.Result{RetryAfter: time.Second, ResetAfter: time.Second}, 9},
	} {
		svc, err := New(rules, &fixedStore{res: tc.res})
		if err != nil {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(200, func() {
			if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		})
		if n > tc.max {
			t.Errorf("%s: %v allocations per call, want at most %v", tc.name, n, tc.max)
		}
	}
}
