package ratelimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// hookStore is a value-type Store with a func field: not comparable.
type hookStore struct {
	ratelimit.Store
	onTake func()
}

func (h hookStore) Take(ctx context.Context, r ratelimit.Request) (ratelimit.Result, error) {
	h.onTake()
	return h.Store.Take(ctx, r)
}

func TestRegressionUncomparableStore(t *testing.T) {
	s := hookStore{Store: memory.New(), onTake: func() {}}
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "a", Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP(), Store: s},
		{Name: "b", Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP()},
	})(http.NotFoundHandler())
	code, _, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("code=%d panic=%v", code, p)
	if p != nil {
		t.Error("multi-rule path panics on a non-comparable Store")
	}
}
