package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
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
