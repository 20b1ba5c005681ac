package ratelimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestDeniedRequestDoesNotConsumeOtherRulesFallback: with the primary store
// down and two rules falling back to one store, a request denied by one
// rule gives back what it took from the other (all or nothing holds on the
// fallback store too).
func TestDeniedRequestDoesNotConsumeOtherRulesFallback(t *testing.T) {
	fb := memory.New()
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerHour(10), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FailurePolicy{Fallback: fb}},
		{Name: "narrow", Limit: ratelimit.PerHour(1), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FailurePolicy{Fallback: fb}},
	}, ratelimit.WithStore(ratelimittest.FailingStore{Err: errStoreDown}))
	h := l.Handler(http.NotFoundHandler())
	for i := range 6 {
		want := http.StatusTooManyRequests
		if i == 0 {
			want = http.StatusNotFound
		}
		if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code != want {
			t.Fatalf("request %d: %d, want %d", i+1, code, want)
		}
	}
	// 1 admitted, 5 denied by "narrow": "wide" has 9 left.
	res, err := fb.Take(context.Background(), stores.Request{Rule: "wide", Key: "192.0.2.1", Limit: ratelimit.PerHour(10), Cost: 0})
	if err != nil || res.Remaining != 9 {
		t.Errorf("wide's fallback bucket: remaining %d (%v), want 9: denied requests consumed it", res.Remaining, err)
	}
}

// funcFieldStore is a value-type Store with a func field: it is not
// comparable, so == on two Store interfaces holding it panics.
type funcFieldStore struct {
	ratelimit.Store
	onTake func()
}

func (h funcFieldStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	h.onTake()
	return h.Store.Take(ctx, r)
}

// TestRulesAcceptUncomparableStore: grouping the rules of a request by
// store does not compare Store values with ==, and the rule on the
// uncomparable store is enforced by it (its limit of 1 denies the second
// request).
// sliceStore is a Store whose dynamic type (a slice) is not comparable.
type sliceStore []int

func (sliceStore) Take(context.Context, stores.Request) (ratelimit.Result, error) {
	return ratelimit.Result{Allowed: true}, nil
}
func (sliceStore) TakeAll(_ context.Context, _ []stores.Request, res []ratelimit.Result) error {
	for i := range res {
		res[i] = ratelimit.Result{Allowed: true}
	}
	return nil
}
func (sliceStore) Return(context.Context, stores.Request) error { return nil }

// wrappedStore is a comparable type whose values may not be: == on two of
// them panics when both hold a sliceStore.
type wrappedStore struct{ ratelimit.Store }

// TestRulesAcceptAComparableTypeHoldingAnUncomparableStore: two rules on
// stores of a comparable type that holds an uncomparable value build a
// Limiter (their stores are not compared with ==) and serve requests.
func TestRulesAcceptAComparableTypeHoldingAnUncomparableStore(t *testing.T) {
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "a", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(), Store: wrappedStore{sliceStore{1}}},
		{Name: "b", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(), Store: wrappedStore{sliceStore{2}}},
	})(http.NotFoundHandler())
	if code, _, p := serve(h, ratelimittest.NewRequest("GET", "/", "")); p != nil || code != http.StatusNotFound {
		t.Fatalf("%d (panic %v), want 404 from the handler", code, p)
	}
}

func TestRulesAcceptUncomparableStore(t *testing.T) {
	s := funcFieldStore{Store: memory.New(), onTake: func() {}}
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "a", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP(), Store: s},
		{Name: "b", Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP()},
	})(http.NotFoundHandler())
	for i, want := range []int{http.StatusNotFound, http.StatusTooManyRequests} {
		code, _, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
		if p != nil || code != want {
			t.Fatalf("request %d: %d (panic %v), want %d", i+1, code, p, want)
		}
	}
}
