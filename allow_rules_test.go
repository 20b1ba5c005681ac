package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestAllowWithOnlyRequestRulesIsInvalid: Allow on a limiter whose every
// rule needs a request (here a Tiers rule) returns ErrInvalidRequest
// instead of panicking, and admits nothing.
func TestAllowWithOnlyRequestRulesIsInvalid(t *testing.T) {
	l := ratelimit.NewRulesLimiter(ratelimit.Tiers("api", ratelimit.ByIP(),
		func(*http.Request) (string, bool) { return "free", true },
		map[string]ratelimit.Plan{"free": {Rate: ratelimit.PerMinute(10)}}))
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("Allow panicked: %v", p)
		}
	}()
	res, err := l.Allow(context.Background(), "k")
	if !errors.Is(err, ratelimit.ErrInvalidRequest) || res.Allowed {
		t.Errorf("Allow = %+v, %v; want not allowed and ErrInvalidRequest", res, err)
	}
}

// laxStore records the requests given back and accepts anything, as a
// store that does not validate them might.
type laxStore struct {
	ratelimit.Store
	returned []ratelimit.Request
}

func (s *laxStore) Return(_ context.Context, req ratelimit.Request) error {
	s.returned = append(s.returned, req)
	return nil
}

// TestReturnOfNegativeEventsIsInvalid: Return of a negative number of
// events is an ErrInvalidRequest error that reaches no store (a negative
// refund would consume units from a store that does not check), as AllowN
// rejects a negative n itself.
func TestReturnOfNegativeEventsIsInvalid(t *testing.T) {
	st := &laxStore{Store: ratelimittest.FailingStore{}}
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.Global(), ratelimit.WithStore(st))
	err := l.Return(context.Background(), "k", -5)
	if !errors.Is(err, ratelimit.ErrInvalidRequest) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Errorf("Return(-5) = %v; want ErrInvalidRequest only", err)
	}
	if len(st.returned) != 0 {
		t.Errorf("Return(-5) reached the store with %+v", st.returned)
	}
}
